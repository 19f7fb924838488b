#!lua
--[[
sliding_window.lua - sluice rate limiter, sliding log: at most L units in
any W ms, counted exactly.

Semantics exactly as src/limit/algo.h states them (the C twin's contract; a
differential test compares the two); arguments and reply: lua/README.md.
State per rule: a sorted set with one member per admitted unit, score =
admission time in ms, member "<now>:<request id>:<1..cost>", so two
requests in the same millisecond never collapse into one member. Members
with score <= now - W are trimmed on every call (that consumes nothing, so
a denial may trim); new members are added only on admission, with the TTL
set to when the newest member leaves the window.
]]
local BUCKET = false
local LEASE = false

--#include lib/prelude.lua

-- ZADD in slices: a cost of thousands of units must not overflow the
-- Lua stack through unpack().
local ZADD_SLICE = 256

local function evaluate(rule, a)
    local L, W, now, c, key = rule.L, rule.W, a.now, a.cost, rule.key
    redis.call('ZREMRANGEBYSCORE', key, '-inf', str(now - W))
    local n = redis.call('ZCARD', key)
    local newest = nil
    if n > 0 then
        newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    end
    -- After an admission the newest member is the one just added (algo.h;
    -- with a clock that stepped back an older-looking one, and the state
    -- expires W after this admission all the same, as in the C twin).
    local reset_after = W
    local r = {
        ok = n + c <= L,
        wait = 0,
        rem_after = math.max(0, L - n - c),
        reset_after = reset_after,
        rem_now = math.max(0, L - n),
        reset_now = newest and newest + W - now or 0,
        retry = 0,
    }
    if not r.ok then
        -- The retry can pass once the oldest n + c - L units have left.
        local rank = n + c - L - 1
        local m = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
        r.retry = tonumber(m[2]) + W - now
    end
    return r
end

-- Writes what evaluate() found, once every rule admits: one member per
-- unit, and the key's TTL.
local function commit(rule, a, r)
    local now, c, key = a.now, a.cost, rule.key
    local prefix = str(now) .. ':' .. a.reqid .. ':'
    local score = str(now)
    local i = 1
    while i <= c do
        local args = {}
        local last = math.min(c, i + ZADD_SLICE - 1)
        for j = i, last do
            args[#args + 1] = score
            args[#args + 1] = prefix .. str(j)
        end
        redis.call('ZADD', key, unpack(args))
        i = last + 1
    end
    redis.call('PEXPIRE', key, str(math.max(1, r.reset_after)))
end

--#include lib/decide.lua
