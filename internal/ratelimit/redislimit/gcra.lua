-- GCRA over several quotas at once, all or none, on Redis's clock.
-- KEYS: one key per quota, holding its theoretical arrival time (TAT) in microseconds.
-- ARGV[1]: "take" (spend one request of every quota if all allow it), "peek" (spend nothing) or "refund" (give one
-- back to every quota); then per quota its interval (window / quota) and its window, in microseconds.
-- Answers, per quota: {allowed (1/0), remaining, reset µs, retry after µs} (nothing for "refund").
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode = ARGV[1]
local function store(key, tat)
  if tat > now then
    redis.call('SET', key, string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000))
  else
    redis.call('DEL', key)
  end
end
if mode == 'refund' then
  for i, key in ipairs(KEYS) do
    local tat = tonumber(redis.call('GET', key))
    if tat then
      store(key, tat - tonumber(ARGV[2 * i]))
    end
  end
  return {}
end
local tats = {}
local all = true
for i, key in ipairs(KEYS) do
  local interval, window = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then
    tat = now
  end
  tats[i] = tat
  -- A request is allowed while the backlog after it stays within one window.
  if tat + interval - window > now then
    all = false
  end
end
local out = {}
for i, key in ipairs(KEYS) do
  local interval, window = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local tat = tats[i]
  local retry = tat + interval - window - now
  if retry > 0 then
    out[i] = {0, 0, tat - now, retry}
  elseif all and mode == 'take' then
    store(key, tat + interval)
    out[i] = {1, math.floor((window - (tat + interval - now)) / interval), tat + interval - now, 0}
  else
    out[i] = {1, math.floor((window - (tat - now)) / interval), tat - now, 0}
  end
end
return out
