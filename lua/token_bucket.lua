#!lua
--[[
token_bucket.lua - sluice rate limiter, token bucket: holds at most B
units, refills L units per W ms; a request takes cost units.

Semantics exactly as src/limit/algo.h states them (the C twin's contract; a
differential test compares the two); arguments and reply: lua/README.md.
The level S is kept in unit-milliseconds (u units = u * W) and refills L
per elapsed millisecond, so no partial refill is ever thrown away and the
long-run rate is exactly L / W. State per rule: the string "<s>:<t>" (s =
S, t = time of the last admission), read with GET and written only on
admission with SET ... PX, with a TTL of the time the bucket takes to be
full again (a full bucket is the same as no key). A value that does not
parse counts as no state, a full bucket. In delay mode S may go below 0:
the units are reserved from the future and the request is held for
delay_ms.
]]
local BUCKET = true
local LEASE = true

--#include lib/prelude.lua

-- The level S (unit-ms) of a rule at 'now', refilled since the last write.
local function level(rule, now)
    local L, W, B = rule.L, rule.W, rule.B
    local full = B * W
    local S = full
    local s, t = get(rule.key, '^(%-?%d+):(%d+)$')
    if s then
        S = s
        local elapsed = math.max(0, now - t)
        -- Compared first so that elapsed * L never grows past the bucket.
        if elapsed >= ceildiv(full - S, L) then
            S = full
        else
            S = S + elapsed * L
        end
    end
    return S
end

local function evaluate(rule, a)
    local L, W, B, now = rule.L, rule.W, rule.B, a.now
    local full, need = B * W, a.cost * rule.W
    local S = level(rule, now)
    local wait = 0
    if S < need then
        wait = ceildiv(need - S, L)
    end
    local after = S - need
    local r = {
        ok = wait <= a.maxd,
        wait = wait,
        rem_after = math.max(0, floordiv(after, W)),
        reset_after = ceildiv(full - after, L),
        rem_now = math.max(0, floordiv(S, W)),
        reset_now = ceildiv(full - S, L),
        retry = wait - a.maxd,
        after = after,
    }
    return r
end

-- Writes what evaluate() found, once every rule admits.
local function commit(rule, a, r)
    store(rule.key, r.reset_after, r.after, a.now)
end

-- A lease's unused units go back into the bucket, which never holds more
-- than B (lua/README.md, "Leases"). Returns the units left and reset_ms.
local function restore(rule, a, units)
    local L, W, B, now, key = rule.L, rule.W, rule.B, a.now, rule.key
    local full = B * W
    local S = math.min(full, level(rule, now) + units * W)
    if S >= full then
        del(key)
    else
        store(key, ceildiv(full - S, L), S, now)
    end
    return math.max(0, floordiv(S, W)), ceildiv(full - S, L)
end

--#include lib/decide.lua
