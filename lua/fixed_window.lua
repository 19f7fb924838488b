#!lua
--[[
fixed_window.lua - sluice rate limiter, fixed window: at most L units in
each aligned window [k*W, (k+1)*W) of W ms.

Semantics exactly as src/algo.h states them (the C twin's contract; a
differential test compares the two); arguments and reply: lua/README.md.
State per rule: hash {w = window number k, n = units admitted in it},
written only on admission, in the same script as its PEXPIRE, so the key
never lives without a TTL; the TTL is the time to the window's end.
]]
local BUCKET = false

-- ---- common part: identical in all six scripts (a test checks) --------
-- Every argument and every product the algorithms form stays at or below
-- 2^50, so arithmetic on Lua's doubles is exact integer arithmetic.
local MAX = 1125899906842624

-- floor(a / b) for b > 0, exact: never math.floor(a / b), which rounds the
-- quotient before flooring once a is large.
local function floordiv(a, b)
    local r = math.fmod(a, b)
    if r < 0 then
        r = r + b
    end
    return (a - r) / b
end

local function ceildiv(a, b)
    return -floordiv(-a, b)
end

-- A decimal integer 0..MAX, or nil: no sign, no fraction, no exponent.
local function int(s)
    if type(s) ~= 'string' or #s > 16 or not string.match(s, '^%d+$') then
        return nil
    end
    local v = tonumber(s)
    if v > MAX then
        return nil
    end
    return v
end

-- Numbers go to Redis as exact integers, never as "%.14g" text.
local function str(v)
    return string.format('%d', v)
end

-- What Redis Cluster hashes: the first non-empty {...}, else the whole key.
local function hashtag(key)
    local open = string.find(key, '{', 1, true)
    if open then
        local close = string.find(key, '}', open + 1, true)
        if close and close > open + 1 then
            return string.sub(key, open + 1, close - 1)
        end
    end
    return key
end

local function parse()
    local nkeys = #KEYS
    if nkeys < 1 or nkeys > 8 then
        return nil, 'expected 1 to 8 keys (one per rule), got ' .. nkeys
    end
    if #ARGV ~= 5 + 3 * nkeys then
        return nil, 'expected ' .. (5 + 3 * nkeys) .. ' arguments for '
            .. nkeys .. ' keys, got ' .. #ARGV
    end
    local tag = hashtag(KEYS[1])
    for i = 1, nkeys do
        if KEYS[i] == '' then
            return nil, 'KEYS[' .. i .. '] is empty'
        end
        if hashtag(KEYS[i]) ~= tag then
            return nil, 'KEYS[' .. i .. '] does not share the hash tag '
                .. 'of KEYS[1]'
        end
        for j = 1, i - 1 do
            if KEYS[j] == KEYS[i] then
                return nil, 'KEYS[' .. i .. '] repeats KEYS[' .. j .. ']'
            end
        end
    end
    local a = {}
    a.now = int(ARGV[1])
    if not a.now then
        return nil, 'time (ARGV[1]) must be an integer in ms, 0 for TIME'
    end
    a.cost = int(ARGV[2])
    if not a.cost or a.cost < 1 then
        return nil, 'cost (ARGV[2]) must be an integer >= 1'
    end
    if ARGV[3] == '1' then
        if not BUCKET then
            return nil, 'delay mode (ARGV[3] = 1) needs token_bucket, '
                .. 'leaky_bucket or gcra'
        end
        a.delay = true
    elseif ARGV[3] == '0' then
        a.delay = false
    else
        return nil, 'mode (ARGV[3]) must be 0 (deny) or 1 (delay)'
    end
    local maxd = int(ARGV[4])
    if not maxd then
        return nil, 'max_delay_ms (ARGV[4]) must be an integer >= 0'
    end
    a.maxd = a.delay and maxd or 0
    a.reqid = ARGV[5]
    if a.reqid == '' then
        return nil, 'request id (ARGV[5]) is empty'
    end
    a.rules = {}
    for i = 1, nkeys do
        local at = 5 + 3 * i
        local L, W, B = int(ARGV[at - 2]), int(ARGV[at - 1]), int(ARGV[at])
        local rule = 'rule ' .. i .. ' (ARGV[' .. (at - 2) .. '..' .. at
            .. ']): '
        if not L or L < 1 or not W or W < 1 or not B or B < 1 then
            return nil, rule
                .. 'limit, window_ms and burst must be integers >= 1'
        end
        if L * W > MAX or B * W > MAX then
            return nil, rule .. 'limit * window_ms and burst * window_ms '
                .. 'must not exceed 2^50'
        end
        if a.delay and maxd * L > MAX then
            return nil, rule .. 'max_delay_ms * limit must not exceed 2^50'
        end
        if not BUCKET and B ~= L then
            return nil, rule .. 'burst must equal limit for a window algorithm'
        end
        if a.cost > B then
            return nil, rule .. 'cost ' .. a.cost .. ' exceeds '
                .. (BUCKET and 'burst ' or 'limit ') .. B
        end
        a.rules[i] = {key = KEYS[i], L = L, W = W, B = B}
    end
    if a.now == 0 then
        local t = redis.call('TIME')
        a.now = tonumber(t[1]) * 1000 + floordiv(tonumber(t[2]), 1000)
    end
    return a
end

-- Writes a hash state and its TTL (at least 1 ms: PEXPIRE 0 deletes).
local function store(key, fields, ttl)
    redis.call('HSET', key, unpack(fields))
    redis.call('PEXPIRE', key, str(math.max(1, ttl)))
end
-- ---- end of common part -------------------------------------------------

local function evaluate(rule, a)
    local L, W, now, c, key = rule.L, rule.W, a.now, a.cost, rule.key
    local k = floordiv(now, W)
    local st = redis.call('HMGET', key, 'w', 'n')
    local n = 0
    if st[1] and tonumber(st[1]) == k then
        n = tonumber(st[2]) or 0
    end
    local reset = (k + 1) * W - now
    local r = {
        ok = n + c <= L,
        wait = 0,
        rem_after = math.max(0, L - n - c),
        reset_after = reset,
        rem_now = math.max(0, L - n),
        reset_now = reset,
        retry = reset,
    }
    r.commit = function()
        store(key, {'w', str(k), 'n', str(n + c)}, reset)
    end
    return r
end

-- ---- common part: identical in all six scripts (a test checks) --------
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
-- ---- end of common part -------------------------------------------------
