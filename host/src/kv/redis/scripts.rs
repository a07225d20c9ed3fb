//! The Lua scripts the Redis backend runs, each one atomic step: storing a value within the
//! quota (`SET`), a counter's increment (`INCREMENT`), a delete (`DELETE`), clearing a
//! namespace (`CLEAR`) and a page of a bucket's keys (`LIST`). The layout of the keys they
//! touch is in [`super`]'s doc.

/// Store a value, within the quota. KEYS: hash, usage, buckets, index, the plugin's usage
/// and its callers' set (for a caller's namespace; otherwise untouched). ARGV: field, value,
/// max bytes, max keys, mode (`set`, `absent`: only if absent, `equal`: only if the value is
/// ARGV[7]), bucket, expected, then for a caller's namespace the plugin's total bytes and keys
/// and the caller's id (empty strings otherwise). Returns {0, '', 0} written, {1, which,
/// amount} over quota, {2, '', 0} not swapped: always three elements.
pub(super) const SET: &str = r"
local field, value = ARGV[1], ARGV[2]
local current = redis.call('HGET', KEYS[1], field)
if ARGV[5] == 'absent' and current then return {2, '', 0} end
if ARGV[5] == 'equal' and current ~= ARGV[7] then return {2, '', 0} end
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
local keys = tonumber(redis.call('HGET', KEYS[2], 'keys') or '0')
local dbytes, dkeys = #field + #value, 1
if current then dbytes, dkeys = #value - #current, 0 end
if dkeys > 0 and keys + 1 > tonumber(ARGV[4]) then return {1, 'keys', keys + 1} end
if dbytes > 0 and bytes + dbytes > tonumber(ARGV[3]) then return {1, 'bytes', bytes + dbytes} end
local total = ARGV[8] ~= ''
if total then
  local tbytes = tonumber(redis.call('HGET', KEYS[5], 'bytes') or '0')
  local tkeys = tonumber(redis.call('HGET', KEYS[5], 'keys') or '0')
  if dkeys > 0 and tkeys + 1 > tonumber(ARGV[9]) then return {1, 'total-keys', tkeys + 1} end
  if dbytes > 0 and tbytes + dbytes > tonumber(ARGV[8]) then return {1, 'total-bytes', tbytes + dbytes} end
end
redis.call('HSET', KEYS[1], field, value)
if not current then redis.call('ZADD', KEYS[4], 0, field) end
redis.call('HINCRBY', KEYS[2], 'bytes', dbytes)
redis.call('HINCRBY', KEYS[2], 'keys', dkeys)
redis.call('SADD', KEYS[3], ARGV[6])
if total then
  redis.call('HINCRBY', KEYS[5], 'bytes', dbytes)
  redis.call('HINCRBY', KEYS[5], 'keys', dkeys)
  redis.call('SADD', KEYS[6], ARGV[10])
end
return {0, '', 0}
";

/// Add to a decimal integer. KEYS: hash, usage, buckets, index, the plugin's usage and its
/// callers' set (as for `SET`). ARGV: field, delta, max bytes, max keys, bucket, unsigned
/// (`1`: refuse a negative sum), then the plugin's total bytes and keys and the caller's id
/// for a caller's namespace (empty strings otherwise). Returns {0, sum, 0}, {1,
/// which, amount} over quota, {3, '', 0} not a counter, {4, current, 0} overflow, {5, sum, 0}
/// negative and unsigned. `HINCRBY` itself checks the value (the canonical decimal text of an
/// i64, as `parse_counter` on disk) and the range; every refusal puts the old value back, so a
/// refused increment writes nothing.
pub(super) const INCREMENT: &str = r"
local field = ARGV[1]
local current = redis.call('HGET', KEYS[1], field)
local keys = tonumber(redis.call('HGET', KEYS[2], 'keys') or '0')
if not current and keys + 1 > tonumber(ARGV[4]) then return {1, 'keys', keys + 1} end
local total = ARGV[7] ~= ''
local tbytes, tkeys = 0, 0
if total then
  tbytes = tonumber(redis.call('HGET', KEYS[5], 'bytes') or '0')
  tkeys = tonumber(redis.call('HGET', KEYS[5], 'keys') or '0')
  if not current and tkeys + 1 > tonumber(ARGV[8]) then return {1, 'total-keys', tkeys + 1} end
end
local ok, err = pcall(redis.call, 'HINCRBY', KEYS[1], field, ARGV[2])
if not ok then
  local why = tostring(err.err or err)
  if string.find(why, 'overflow', 1, true) then return {4, current or '0', 0} end
  return {3, '', 0}
end
local sum = redis.call('HGET', KEYS[1], field)
local function undo()
  if current then redis.call('HSET', KEYS[1], field, current) else redis.call('HDEL', KEYS[1], field) end
end
if ARGV[6] == '1' and string.sub(sum, 1, 1) == '-' then
  undo()
  return {5, sum, 0}
end
local dbytes, dkeys = #field + #sum, 1
if current then dbytes, dkeys = #sum - #current, 0 end
local bytes = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
if dbytes > 0 and bytes + dbytes > tonumber(ARGV[3]) then
  undo()
  return {1, 'bytes', bytes + dbytes}
end
if total and dbytes > 0 and tbytes + dbytes > tonumber(ARGV[7]) then
  undo()
  return {1, 'total-bytes', tbytes + dbytes}
end
if not current then redis.call('ZADD', KEYS[4], 0, field) end
redis.call('HINCRBY', KEYS[2], 'bytes', dbytes)
redis.call('HINCRBY', KEYS[2], 'keys', dkeys)
redis.call('SADD', KEYS[3], ARGV[5])
if total then
  redis.call('HINCRBY', KEYS[5], 'bytes', dbytes)
  redis.call('HINCRBY', KEYS[5], 'keys', dkeys)
  redis.call('SADD', KEYS[6], ARGV[9])
end
return {0, sum, 0}
";

/// Remove a key. KEYS: hash, usage, index, the plugin's usage, buckets, the plugin's
/// callers' set. ARGV: field, `1` for a caller's namespace (whose removals count against the
/// plugin's total too), the caller's id. A caller left with no keys leaves nothing behind
/// (its usage, its buckets' set, its place in the callers' set).
pub(super) const DELETE: &str = r"
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[2], 'bytes', -(#ARGV[1] + #current))
local left = redis.call('HINCRBY', KEYS[2], 'keys', -1)
if ARGV[2] == '1' then
  redis.call('HINCRBY', KEYS[4], 'bytes', -(#ARGV[1] + #current))
  redis.call('HINCRBY', KEYS[4], 'keys', -1)
  if left <= 0 then
    redis.call('DEL', KEYS[2], KEYS[5])
    redis.call('SREM', KEYS[6], ARGV[3])
  end
end
return 1
";

/// Remove all of a namespace's data. KEYS: usage, buckets, the plugin's usage and callers'
/// set. ARGV: the hash name prefix, the index name prefix, and for a caller's namespace its
/// id (empty otherwise): the plugin's total goes down by what it held.
pub(super) const CLEAR: &str = r"
local removed = 0
for _, bucket in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local hash = ARGV[1] .. bucket
  removed = removed + redis.call('HLEN', hash)
  redis.call('DEL', hash, ARGV[2] .. bucket)
end
if ARGV[3] ~= '' then
  local bytes = tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0')
  local keys = tonumber(redis.call('HGET', KEYS[1], 'keys') or '0')
  redis.call('HINCRBY', KEYS[3], 'bytes', -bytes)
  redis.call('HINCRBY', KEYS[3], 'keys', -keys)
  redis.call('SREM', KEYS[4], ARGV[3])
end
redis.call('DEL', KEYS[1], KEYS[2])
return removed
";

/// One page of a bucket's keys. KEYS: hash, index. ARGV: where to start (`-`, or `(` and the
/// cursor), how many. The index is rebuilt first if its size is not the hash's (a bucket
/// written before the index existed).
pub(super) const LIST: &str = r"
local n = redis.call('HLEN', KEYS[1])
if redis.call('ZCARD', KEYS[2]) ~= n then
  redis.call('DEL', KEYS[2])
  local fields = redis.call('HKEYS', KEYS[1])
  for i = 1, #fields, 500 do
    local args = {}
    for j = i, math.min(i + 499, #fields) do
      args[#args + 1] = 0
      args[#args + 1] = fields[j]
    end
    redis.call('ZADD', KEYS[2], unpack(args))
  end
end
return redis.call('ZRANGEBYLEX', KEYS[2], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
";
