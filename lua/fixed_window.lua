#!lua
--[[
fixed_window.lua - sluice rate limiter, fixed window: at most L units in
each aligned window [k*W, (k+1)*W) of W ms.

Semantics exactly as src/algo.h states them (the C twin's contract; a
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
    local st = get(key)
    local n = 0
    if st then
        local w, m = string.match(st, '^(%d+):(%d+)$')
        if w and tonumber(w) == k then
            n = tonumber(m)
        end
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
        store(key, string.format('%d:%d', k, n + c), reset)
    end
    return r
end

--#include lib/decide.lua
