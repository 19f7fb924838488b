#!lua
--[[
sliding_window_counter.lua - sluice rate limiter, sliding window counter:
the count of the current aligned window plus the previous window's count
weighted by the share of it still inside the sliding window; O(1) memory.

Semantics exactly as src/limit/algo.h states them (the C twin's contract; a
differential test compares the two); arguments and reply: lua/README.md.
The weighting is kept scaled by W (used = prev * (W - e) + cur * W), so no
fraction is rounded. State per rule: the string "<w>:<cur>:<prev>" (w =
window number), read with GET and written only on admission with
SET ... PX, with a TTL of 2W - e: until the current window's count no
longer weighs anything. A value that does not parse counts as no state.
]]
local BUCKET = false
local LEASE = false

--#include lib/prelude.lua

local function evaluate(rule, a)
    local L, W, now, c, key = rule.L, rule.W, a.now, a.cost, rule.key
    local k = floordiv(now, W)
    local e = now - k * W
    local cur, prev = 0, 0
    local w, cu, pr = get(key, '^(%d+):(%d+):(%d+)$')
    if w == k then
        cur, prev = cu, pr
    elseif w == k - 1 then
        cur, prev = 0, cu
    end
    local used = prev * (W - e) + cur * W
    local function reset_of(cu, pr)
        if cu > 0 then
            return 2 * W - e
        elseif pr > 0 then
            return W - e
        end
        return 0
    end
    local r = {
        ok = used + c * W <= L * W,
        wait = 0,
        rem_after = math.max(0, floordiv(L * W - used - c * W, W)),
        reset_after = reset_of(cur + c, prev),
        rem_now = math.max(0, floordiv(L * W - used, W)),
        reset_now = reset_of(cur, prev),
        retry = 0,
    }
    if not r.ok then
        if cur + c <= L then
            -- This window has room: wait until the previous window's
            -- weight has shrunk enough (prev > 0 here, or it would fit).
            local e1 = W - floordiv((L - cur - c) * W, prev)
            r.retry = e1 - e
        else
            -- Only the next window can take it, once this window's count,
            -- then its previous one, weighs little enough (cur > 0 here).
            local e2 = W - floordiv((L - c) * W, cur)
            r.retry = (W - e) + e2
        end
    end
    r.k, r.e, r.cur, r.prev = k, e, cur, prev
    return r
end

-- Writes what evaluate() found, once every rule admits.
local function commit(rule, a, r)
    store(rule.key, 2 * rule.W - r.e, r.k, r.cur + a.cost, r.prev)
end

--#include lib/decide.lua
