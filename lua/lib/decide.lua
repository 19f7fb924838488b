-- decide.lua - the second half every rate-limit script shares: evaluate
-- every rule, write only if all admit, and build the reply record
-- (src/limit/algo.h, "Combining"); then run one call, or each call of a batch.
-- Put in place of "--#include lib/decide.lua" by cmake/embed_lua.cmake;
-- it expects parse(), evaluate() and commit() above it, and restore()
-- too where LEASE is true. evaluate(rule, a) reads a rule's state and
-- returns what the rule decides, without writing; commit(rule, a, r)
-- writes the state that evaluate() returned as r.
-- All-or-nothing: every rule is evaluated before anything is written, and
-- states are written only if every rule admits (algo.h, "Combining").
-- A lease take (lua/README.md, "Leases") grants at most this share of
-- the units the tightest rule has left, so that the lease shrinks as the
-- bucket nears empty, down to the cost itself.
local LEASE_SHARE = 4

-- Every rule's evaluation, in res[1..#a.rules] (one table for the whole
-- run: entries past the call's rules are stale), and whether they all
-- admit.
local res = {}
local function evaluate_all(a)
    local rules, ok = a.rules, true
    for i = 1, #rules do
        local r = evaluate(rules[i], a)
        res[i] = r
        ok = ok and r.ok
    end
    return ok
end

-- One call: its error reply (a table), or its reply's integers as
-- values: allowed, remaining, retry_after_ms, reset_ms, delay_ms, rule,
-- and for a lease, the units granted (algo.h, "Combining").
local function decide()
    local a, err = parse()
    if not a then
        return redis.error_reply('ERR sluice: ' .. err)
    end
    if a.op == 'return' then
        -- Only token_bucket and gcra get here: parse() sets op where LEASE is.
        local remaining, rule, reset = nil, 0, 0
        for i = 1, #a.rules do
            local rem, rs = restore(a.rules[i], a, a.units)
            if remaining == nil or rem < remaining then
                remaining, rule = rem, i - 1
            end
            if rs > reset then
                reset = rs
            end
        end
        return 1, remaining, 0, reset, 0, rule, a.units
    end
    local n = #a.rules
    local allowed = evaluate_all(a)
    if allowed and a.op == 'take' then
        -- Units reserved from the future (delay mode) are never leased.
        local avail, waits = nil, false
        for i = 1, n do
            waits = waits or res[i].wait > 0
            if avail == nil or res[i].rem_now < avail then
                avail = res[i].rem_now
            end
        end
        if not waits then
            local g = math.min(a.units, math.max(a.cost,
                                                 floordiv(avail, LEASE_SHARE)))
            if g > a.cost then
                -- g <= avail: every rule still admits, with no wait.
                a.cost = g
                allowed = evaluate_all(a)
            end
        end
    end
    local remaining, rule, reset, delay = nil, 0, 0, 0
    for i = 1, n do
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
        for i = 1, n do
            commit(a.rules[i], a, res[i])
        end
        return 1, remaining, 0, reset, delay, rule,
               a.op == 'take' and a.cost or nil
    end
    local retry = -1
    for i = 1, n do
        if not res[i].ok and res[i].retry > retry then
            retry, rule = res[i].retry, i - 1
        end
    end
    return 0, remaining, retry, reset, 0, rule, a.op == 'take' and 0 or nil
end

-- The calls of a batch (lua/README.md, "Batches"): ARGV[1] is "batch",
-- ARGV[2] the number of calls n, then each call as <nkeys> <nargs> and
-- its own ARGV; KEYS holds the keys of all the calls, in order. Each call
-- is decided as if it came alone, in order; the batch's reply's element
-- is its error, or its integers joined by ':' in one string (a client
-- reads one string with far less work than an array of integers). The
-- shape is checked whole before any call runs: a malformed batch writes
-- nothing.
local function decide_packed()
    local allowed, remaining, retry, reset, delay, rule, units = decide()
    if type(allowed) == 'table' then
        return allowed
    end
    if units then
        return string.format('%d:%d:%d:%d:%d:%d:%d', allowed, remaining,
                             retry, reset, delay, rule, units)
    end
    return string.format('%d:%d:%d:%d:%d:%d', allowed, remaining, retry,
                         reset, delay, rule)
end

local function batch()
    local keys, args = KEYS, ARGV
    local n = int(args[2] or '')
    if not n or n < 1 then
        return redis.error_reply('ERR sluice: batch: ARGV[2] must be the '
            .. 'number of calls, >= 1')
    end
    -- Four slots per call: key offset, key count, argument offset,
    -- argument count.
    local calls, k, at = {}, 1, 3
    for i = 1, n do
        local nk, na = int(args[at] or ''), int(args[at + 1] or '')
        if not nk or not na or k + nk - 1 > #keys
            or at + 1 + na > #args then
            return redis.error_reply('ERR sluice: batch: call ' .. i
                .. ' (ARGV[' .. at .. ']) names more keys or arguments '
                .. 'than the batch holds')
        end
        local c = 4 * i
        calls[c - 3], calls[c - 2], calls[c - 1], calls[c] = k - 1, nk,
                                                             at + 1, na
        k, at = k + nk, at + 2 + na
    end
    if k ~= #keys + 1 or at ~= #args + 1 then
        return redis.error_reply('ERR sluice: batch: ' .. (#keys - k + 1)
            .. ' keys and ' .. (#args - at + 1) .. ' arguments belong to '
            .. 'no call')
    end
    local out = {}
    for i = 1, n do
        local c = 4 * i
        K0, NK, A0, NA = calls[c - 3], calls[c - 2], calls[c - 1], calls[c]
        -- A command that fails (a key of another type) fails its own
        -- call only.
        local mark = begin()
        local ok, r = pcall(decide_packed)
        if not ok then
            -- Whatever it wrote before it failed (a lease return of
            -- several rules) is taken back, as a call alone fails whole.
            undo(mark)
            if type(r) ~= 'table' or not r.err then
                r = {err = 'ERR sluice: ' .. tostring(r)}
            end
        end
        out[i] = r
    end
    return out
end

local out
if ARGV[1] == 'batch' then
    out = batch()
else
    -- Six integers, or seven for a lease: Redis's reply stops at the
    -- first nil of the table.
    out = {decide()}
    if type(out[1]) == 'table' then
        out = out[1]
    end
end
flush()
return out
