#!lua
--[[
leaky_bucket.lua - sluice rate limiter, leaky bucket: holds at most B
units of water, leaks L units per W ms; a request pours in cost units.

Semantics exactly as src/limit/algo.h states them (the C twin's contract; a
differential test compares the two); arguments and reply: lua/README.md.
The water V is kept in unit-milliseconds (u units = u * W) and leaks L per
elapsed millisecond of Redis time, so no fraction of a leak is lost. Deny
mode admits while the water fits; delay mode treats the bucket as a queue
drained at the rate, and the request waits for the water ahead of it.
State per rule: the string "<v>:<t>" (v = V, t = time of the last
admission), read with GET and written only on admission with SET ... PX,
with a TTL of the time the bucket takes to drain. A value that does not
parse counts as no state, an empty bucket.
]]
local BUCKET = true
local LEASE = false

--#include lib/prelude.lua

local function evaluate(rule, a)
    local L, W, B, now, key = rule.L, rule.W, rule.B, a.now, rule.key
    local full, need = B * W, a.cost * rule.W
    local V = 0
    local v, t = get(key, '^(%d+):(%d+)$')
    if v then
        V = v
        local elapsed = math.max(0, now - t)
        -- Compared first so that elapsed * L never grows past the water.
        if elapsed >= ceildiv(V, L) then
            V = 0
        else
            V = V - elapsed * L
        end
    end
    local wait, retry, ok
    if not a.delay then
        wait = 0
        if V + need > full then
            wait = ceildiv(V + need - full, L)
        end
        ok = wait == 0
        retry = wait
    else
        local cap_ok = V + need <= full
        wait = ceildiv(V, L)
        ok = cap_ok and wait <= a.maxd
        retry = math.max(cap_ok and 0 or ceildiv(V + need - full, L),
                         wait - a.maxd)
    end
    local after = V + need
    local r = {
        ok = ok,
        wait = wait,
        rem_after = math.max(0, floordiv(full - after, W)),
        reset_after = ceildiv(after, L),
        rem_now = math.max(0, floordiv(full - V, W)),
        reset_now = ceildiv(V, L),
        retry = retry,
        after = after,
    }
    return r
end

-- Writes what evaluate() found, once every rule admits.
local function commit(rule, a, r)
    store(rule.key, r.reset_after, r.after, a.now)
end

--#include lib/decide.lua
