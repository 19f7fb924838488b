-- decide.lua - the second half every rate-limit script shares: evaluate
-- every rule, write only if all admit, and build the reply record
-- (src/algo.h, "Combining"). Put in place of "--#include lib/decide.lua"
-- by cmake/embed_lua.cmake; it expects parse() and evaluate() above it.
-- All-or-nothing: every rule is evaluated before anything is written, and
-- states are written only if every rule admits (algo.h, "Combining").
local a, err = parse()
if not a then
    return redis.error_reply('ERR sluice: ' .. err)
end
local res, allowed = {}, true
for i = 1, #a.rules do
    res[i] = evaluate(a.rules[i], a)
    allowed = allowed and res[i].ok
end
local remaining, rule, reset, delay = nil, 0, 0, 0
for i = 1, #res do
    local r = res[i]
    local rem = allowed and r.rem_after or r.rem_now
    local rs = allowed and r.reset_after or r.reset_now
    if remaining == nil or rem < remaining then
        remaining, rule = rem, i - 1
    end
    if rs > reset then
        reset = rs
    end
    if r.wait > delay then
        delay = r.wait
    end
end
if allowed then
    for i = 1, #res do
        res[i].commit()
    end
    return {1, remaining, 0, reset, delay, rule}
end
local retry = -1
for i = 1, #res do
    if not res[i].ok and res[i].retry > retry then
        retry, rule = res[i].retry, i - 1
    end
end
return {0, remaining, retry, reset, 0, rule}
