#!lua
--[[
fixed_window.lua - sluice rate limiter, fixed window: at most L units in
each aligned window [k*W, (k+1)*W) of W ms.

Semantics exactly as src/limit/algo.h states them (the C twin's contract; a
differential test compares the two); arguments and reply: lua/README.md.
State per rule: the string "<w>:<n>" (w = window number k, n = units
admitted in it), read with GET and written only on admission with
SET ... PX, so the key never lives without a TTL; the TTL is the time to
the window's end. A value that does not parse counts as no state.
]]
local BUCKET = false
local LEASE = false

--#include lib/prelude.lua

local function evaluate(rule, a)
    local L, W, now, c, key = rule.L, rule.W, a.now, a.cost, rule.key
    local k = floordiv(now, W)
    local n = 0
    local w, m = get(key, '^(%d+):(%d+)$')
    if w == k then
        n = m
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
        k = k,
        n = n,
    }
    return r
end

-- Writes what evaluate() found, once every rule admits.
local function commit(rule, a, r)
    store(rule.key, r.reset_after, r.k, r.n + a.cost)
end

--#include lib/decide.lua
