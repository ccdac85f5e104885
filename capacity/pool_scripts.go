package capacity

import "github.com/redis/go-redis/v9"

// The display counter of a pool is one Redis hash (see PoolKey), in a slot
// of its own, with the fields:
//
//	taken       the seats of the occupying registrations of all its
//	            activities at the authority as of seq
//	seq         the pool's last seq that taken reflects
//	held        seats held in it for signups in flight, of any of its
//	            activities
//	capacity    the pool's capacity
//	version     the pool's updated_at (unix microseconds) that capacity
//	            reflects
//	gen         the counter's generation: a new one at every build
//	activities  the pool's activities as of seq, sorted and comma-separated
//	reserved    the unused seats of its activities' blocks as of seq
//	            (counted as taken by the gate; missing reads as 0)
//
// A signup of a pooled activity holds its seats in the activity's counter
// (reserveScript) and then in each pool's (poolReserveScript): one script
// per slot, since one script cannot touch keys of several slots.

// poolLua is the pool's part of the admission rule (registration.Admit's
// Counts.Shared and PoolCapacity): a signup for seats fits a pool
// ('seat') when that many are left in it, taken + held + reserved counted
// as taken; it is 'short' when they are not, and 'never' when the pool's
// capacity (unless 0) can never hold them (refused as full, waiting list
// or not).
// The activity's part (admitLua) is decided first;
// TestTheGateAdmitsAsTheRuleInPools requires both together to answer as
// registration.Admit.
const poolLua = `
local function pool_fit(capacity, taken, seats)
  if capacity > 0 and seats > capacity then return 'never' end
  if capacity - taken >= seats then return 'seat' end
  return 'short'
end
`

// poolReserveScript holds seats in a pool's counter.
//
// KEYS[1] the pool's counter, KEYS[2] its holds, ARGV[1] the seats,
// ARGV[2] the hold's lifetime in milliseconds, ARGV[3] its member.
// Returns {-1} when the counter is missing (it never creates it), {-2}
// when the seats do not fit, {-5} when the pool can never hold them, else
// {1, member} after adding them to held.
var poolReserveScript = redis.NewScript(poolLua + holdsLua + `
local v = redis.call('HMGET', KEYS[1], 'taken', 'held', 'capacity', 'gen', 'reserved', 'due')
if not v[1] then
  gone(KEYS[1], KEYS[2])
  return {-1}
end
v[2], v[6] = prune_read(KEYS[1], KEYS[2], v[2], v[6])
if not v[3] then return {-1} end
local seats = tonumber(ARGV[1])
local f = pool_fit(tonumber(v[3]), tonumber(v[1]) + tonumber(v[2] or '0') + tonumber(v[5] or '0'), seats)
if f == 'never' then return {-5} end
if f == 'short' then return {-2} end
hold(seats, tonumber(ARGV[2]), ARGV[3], v[6])
return {1, ARGV[3]}
`)

// poolHoldsScript answers whether a pool's capacity can ever hold a
// signup (for one that its activity would put on the waiting list).
//
// KEYS[1] the pool's counter, ARGV[1] the seats. Returns -1 when the
// counter is missing, 0 when the pool can never hold them, else 1.
var poolHoldsScript = redis.NewScript(poolLua + `
local c = redis.call('HGET', KEYS[1], 'capacity')
if not c then return -1 end
if pool_fit(tonumber(c), 0, tonumber(ARGV[1])) == 'never' then return 0 end
return 1
`)

// pooledReserveScript holds seats for a signup of a pooled activity in
// its counter and its pools' counters at once, as reserveScript and
// poolReserveScript answer together: all of them or none. It touches the
// keys of several slots, so it runs only on a Redis that is not a
// Cluster (see Counter.Reserve).
//
// KEYS[1] the activity's counter, KEYS[2] its holds, then each pool's
// counter and holds; ARGV[1] the seats, ARGV[2] the hold's lifetime in
// milliseconds, ARGV[3] its member, ARGV[4] the activity's pools as the
// caller knows them (the counter's pools field). Returns {-1} when a
// counter is missing, {-4, pools} when the activity's pools are not the
// ones given (nothing held), {-3} for the waiting list, {-2} when full
// (or when a pool can never hold the seats),
// else {1, member, pools, waitlist} after adding the seats to every
// counter's held.
var pooledReserveScript = redis.NewScript(gateLua + poolLua + `
local seats = tonumber(ARGV[1])
local v, a = gate(seats)
if not v then return {-1} end
if v[8] ~= ARGV[4] then return {-4, v[8]} end
if a == 'full' then return {-2} end
local room = true
local due = {v[10]}
for i = 3, #KEYS, 2 do
  local p = redis.call('HMGET', KEYS[i], 'taken', 'held', 'capacity', 'reserved', 'due')
  if not p[1] then
    gone(KEYS[i], KEYS[i + 1])
    return {-1}
  end
  p[2], due[i] = prune_read(KEYS[i], KEYS[i + 1], p[2], p[5])
  if not p[3] then return {-1} end
  local f = pool_fit(tonumber(p[3]), tonumber(p[1]) + tonumber(p[2] or '0') + tonumber(p[4] or '0'), seats)
  if f == 'never' then return {-2} end
  if f == 'short' then room = false end
end
if a == 'waitlist' then return {-3} end
if not room then
  if v[5] == '1' then return {-3} end
  return {-2}
end
for i = 1, #KEYS, 2 do hold_at(KEYS[i], KEYS[i + 1], seats, tonumber(ARGV[2]), ARGV[3], due[i]) end
return {1, ARGV[3], v[8], v[5] or '0'}
`)

// poolSettleScript applies a pool's state after a commit, and gives back
// the holds of the commit's signups.
//
// KEYS[1] the pool's counter, KEYS[2] its holds. ARGV[1] the pool's last seq after the commit
// (-1: no state, only holds to give back), ARGV[2] its taken, ARGV[3] its
// capacity, ARGV[4] its updated_at (unix microseconds), ARGV[5] a TTL in
// milliseconds, ARGV[6] a fresh generation for a counter built here,
// ARGV[7] its activities, ARGV[8] its reserved, then pairs of
// (member, seats) of holds to give back. As settleScript: a missing counter is built from the state,
// taken (and activities) are set only when the seq is newer, capacity only
// when the updated_at is, and holds are given back only while still held. Returns 0 when nothing was done, 2 when the counter was
// built, else 1.
var poolSettleScript = redis.NewScript(holdsLua + `
local seq = tonumber(ARGV[1])
prune()
if redis.call('EXISTS', KEYS[1]) == 0 then
  if seq < 0 then return 0 end
  redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'held', 0, 'capacity', ARGV[3], 'version', ARGV[4], 'seq', ARGV[1],
    'gen', ARGV[6], 'activities', ARGV[7], 'reserved', ARGV[8])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 2
end
if seq >= 0 then
  if seq > tonumber(redis.call('HGET', KEYS[1], 'seq') or '-1') then
    redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'seq', ARGV[1], 'activities', ARGV[7], 'reserved', ARGV[8])
  end
  if tonumber(ARGV[4]) > tonumber(redis.call('HGET', KEYS[1], 'version') or '-1') then
    redis.call('HSET', KEYS[1], 'capacity', ARGV[3], 'version', ARGV[4])
  end
end
give_back(9)
return 1
`)

// poolBuildScript writes a pool's counter from the authority, only if none
// exists.
//
// KEYS[1] the pool's counter, KEYS[2] its holds; ARGV[1] taken, ARGV[2] capacity, ARGV[3]
// seq, ARGV[4] updated_at (unix microseconds), ARGV[5] TTL in
// milliseconds, ARGV[6] a fresh generation, ARGV[7] activities, ARGV[8]
// reserved. Returns 1 when written, 0 when a counter was already there.
var poolBuildScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'taken', ARGV[1], 'held', 0, 'capacity', ARGV[2], 'seq', ARGV[3], 'version', ARGV[4],
  'gen', ARGV[6], 'activities', ARGV[7], 'reserved', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`)

// poolCorrectScript resets a pool's counter of a given generation to the
// authority, dropping its holds, unless a newer commit reached it.
//
// KEYS[1] the pool's counter, KEYS[2] its holds; ARGV[1] the generation, ARGV[2] taken,
// ARGV[3] seq, ARGV[4] reserved. Returns 1 when corrected, 0 otherwise.
var poolCorrectScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'seq') or '-1') > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'seq', ARGV[3], 'held', 0, 'reserved', ARGV[4])
redis.call('DEL', KEYS[2])
return 1
`)
