package capacity

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The display counter of an activity is one Redis hash (see Key) with the
// fields:
//
//	taken     occupying registrations at the authority as of seq
//	waiting   waitlisted registrations as of seq
//	seq       the activity's last event seq that taken and waiting reflect
//	held      seats held for signups in flight (given back after their
//	          transaction, or dropped at their deadline: see holdsLua)
//	capacity  the activity's capacity
//	waitlist  1 when the activity keeps a waiting list, else 0
//	fill      1 under the waiting-list policy fill, else 0 (strict)
//	version   the activity's updated_at (unix microseconds) that capacity,
//	          waitlist and fill reflect
//	gen       the counter's generation: a new one at every build
//	pools     the activity's pools: their ids sorted and comma-separated,
//	          "" for none (set with taken, or with capacity: by the newer
//	          of the two)
//	reserved  the unused seats of the activity's blocks as of seq (set
//	          with taken; missing in a counter written before blocks
//	          existed, when no activity had any: read as 0)
//	due       no hold is due before it (see holdsLua): a deadline
//	          (Redis server time, unix milliseconds), "none" when there
//	          is no hold, missing when not known
//
// Beside it, HoldsKey names a sorted set (same hash tag, same slot) of the
// holds counted in held, each a member "<id>:<seats>" scored by its
// deadline (Redis server time, unix milliseconds): the request's deadline,
// after which the signup cannot commit through the hold any more. Every
// script prunes the holds past their deadline first (holdsLua), so that a
// hold of an instance that died is never counted past its deadline; the
// counter's due field spares a script that finds no hold due the look.
//
// The gate counts taken+held+reserved as taken: reserved seats are free
// to their blocks' audiences only, whose signups the authority decides.
// The display shows taken+held: signups in flight count as taken at once,
// so the display errs towards fewer seats left. Every script below is one
// atomic step on it.

// admitLua is the Lua form of registration.Admit, the one admission rule
// (a Redis script cannot call Go): a signup for seats takes them when that
// many are free and nobody waits (strict) or whoever waits (fill); else
// it joins the waiting list when the activity keeps one; else it is
// refused as full. A signup for more seats than the capacity can ever
// hold is refused as full, waiting list or not (a capacity of 0 refuses
// none: it holds no seats yet). taken is the counter's
// taken + held + reserved. It is written here
// once, and TestTheGateAdmitsAsTheRule requires it to answer as
// registration.Admit on the same counts: change both together.
const admitLua = `
local function admit(capacity, taken, waiting, waitlist, fill, seats)
  if capacity > 0 and seats > capacity then return 'full' end
  if capacity - taken >= seats and (waiting == 0 or fill) then return 'seat' end
  if waitlist then return 'waitlist' end
  return 'full'
end
`

// gateLua is the prelude of the reserve scripts, written once: admitLua,
// holdsLua, and gate(seats), which reads the activity's counter (KEYS[1]),
// prunes its holds (KEYS[2]) and answers admitLua on it. It returns nil
// when the counter is missing (or lacks its pools field), else the fields
// read (taken, held, capacity, waiting, waitlist, gen, fill, pools,
// reserved, due), held and due as pruned, and the answer.
const gateLua = admitLua + holdsLua + `
local function gate(seats)
  local v = redis.call('HMGET', KEYS[1], 'taken', 'held', 'capacity', 'waiting', 'waitlist', 'gen', 'fill', 'pools', 'reserved', 'due')
  if not v[1] then
    gone(KEYS[1], KEYS[2])
    return nil
  end
  v[2], v[10] = prune_read(KEYS[1], KEYS[2], v[2], v[10])
  if not v[3] or not v[8] then return nil end
  local a = admit(tonumber(v[3]), tonumber(v[1]) + tonumber(v[2] or '0') + tonumber(v[9] or '0'), tonumber(v[4] or '0'),
    v[5] == '1', v[7] == '1', seats)
  return v, a
end
`

// reserveScript holds seats for a signup, as admitLua answers on the
// counter's fields.
//
// KEYS[1] the counter, KEYS[2] its holds, ARGV[1] the seats asked for,
// ARGV[2] the hold's lifetime (milliseconds: the request's deadline),
// ARGV[3] the hold's member ("<id>:<seats>"). Returns {-1} when the
// counter is missing (it never creates it; a counter without its pools
// field, written before pools existed, counts as missing), {-3} when the
// signup joins the waiting list (with the activity's pools: the caller asks
// whether they can ever hold the signup, see poolHoldsScript), {-2} when
// it is refused as full, else
// {1, member, pools, waitlist} after adding the seats to held: the activity's
// pools (the caller holds the seats in each of them next, see
// poolReserveScript) and its waiting-list setting ('1' or '0': what a pool
// without room answers).
var reserveScript = redis.NewScript(gateLua + `
local seats = tonumber(ARGV[1])
local v, a = gate(seats)
if not v then return {-1} end
if a == 'waitlist' then return {-3, v[8]} end
if a == 'full' then return {-2} end
hold(seats, tonumber(ARGV[2]), ARGV[3], v[10])
return {1, ARGV[3], v[8], v[5] or '0'}
`)

// holdsLua keeps held to the holds not past their deadline. A counter's
// due field is a time before which no hold of it is due: every hold's
// deadline is at or after it ("none": there is no hold; missing: not
// known, as in a counter just built). prune_read(counter, holds, held,
// due), given the counter's held and due as just read, does nothing when
// due is in the future (the common case: one clock read); else it drops
// the members of holds scored before Redis's clock, takes their seats off
// held (never below zero), sets due to the earliest deadline left, and
// returns held and due as they are now. prune_at does the same reading
// them itself, and gone drops a hold set whose counter is missing
// (prune_at does it too). hold_at(counter, holds, seats, ms, member, due)
// holds seats in any counter until ms from now, moving due back when the
// hold is due before it; the holds' key outlives its last hold by a
// second or more. give_back gives back holds to the counter KEYS[1]: ARGV
// from index first on holds pairs of (member, seats), each taken off held
// only when it is still in KEYS[2] (a rebuilt counter has none of the
// holds of the one before it); due stays, still before every hold left.
// prune and hold are prune_at and hold_at on KEYS[1] and KEYS[2].
const holdsLua = `
local now_at
local function now_ms()
  if not now_at then
    local t = redis.call('TIME')
    now_at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_at
end
local function gone(counter, holds)
  if redis.call('EXISTS', counter) == 0 then redis.call('DEL', holds) end
end
local function prune_read(counter, holds, held, due)
  local at = tonumber(due)
  if due == 'none' or (at and at > now_ms()) then return held, due end
  local now = now_ms()
  local out = redis.call('ZRANGEBYSCORE', holds, '-inf', now)
  if #out > 0 then
    local n = 0
    for _, m in ipairs(out) do n = n + (tonumber(string.match(m, ':(%d+)$')) or 0) end
    redis.call('ZREMRANGEBYSCORE', holds, '-inf', now)
    held = tostring(math.max(0, tonumber(held or '0') - n))
    redis.call('HSET', counter, 'held', held)
  end
  local first = redis.call('ZRANGE', holds, 0, 0, 'WITHSCORES')
  due = first[2] or 'none'
  redis.call('HSET', counter, 'due', due)
  return held, due
end
local function prune_at(counter, holds)
  local v = redis.call('HMGET', counter, 'taken', 'held', 'due')
  if not v[1] and redis.call('EXISTS', counter) == 0 then
    redis.call('DEL', holds)
    return
  end
  prune_read(counter, holds, v[2], v[3])
end
local function prune() prune_at(KEYS[1], KEYS[2]) end
local function hold_at(counter, holds, seats, ms, member, due)
  local deadline = now_ms() + ms
  redis.call('HINCRBY', counter, 'held', seats)
  redis.call('ZADD', holds, deadline, member)
  local at = tonumber(due)
  if not at or deadline < at then redis.call('HSET', counter, 'due', deadline) end
  if redis.call('PTTL', holds) < ms + 1000 then redis.call('PEXPIRE', holds, ms + 2000) end
end
local function hold(seats, ms, member, due) hold_at(KEYS[1], KEYS[2], seats, ms, member, due) end
local function give_back(first)
  for i = first, #ARGV, 2 do
    if redis.call('ZREM', KEYS[2], ARGV[i]) == 1 then
      local n = math.min(tonumber(redis.call('HGET', KEYS[1], 'held') or '0'), tonumber(ARGV[i + 1]))
      if n > 0 then redis.call('HINCRBY', KEYS[1], 'held', -n) end
    end
  end
end
`

// readScript reads fields of a counter after pruning its holds past
// their deadline: KEYS[1] the counter, KEYS[2] its holds, ARGV the
// fields. Returns their values as HMGET does, then the counter's PTTL.
var readScript = redis.NewScript(holdsLua + `
prune()
local v = redis.call('HMGET', KEYS[1], unpack(ARGV))
v[#v + 1] = redis.call('PTTL', KEYS[1])
return v
`)

// settleScript applies one commit of the activity's change transaction.
//
// KEYS[1] the counter, KEYS[2] its holds. ARGV[1] the commit's last seq (-1 for a failed
// transaction: nothing to apply but the holds), ARGV[2] taken, ARGV[3]
// waiting, ARGV[4] capacity and ARGV[5] waitlist (0/1) after the commit,
// ARGV[6] the activity's updated_at after the commit (unix microseconds:
// every change of capacity or waitlist moves it forward), ARGV[7] a TTL
// in milliseconds, ARGV[8] a fresh generation for a counter built here
// ARGV[9] fill (0/1) and ARGV[10] the activity's pools (ids sorted and
// comma-separated) after the commit, ARGV[11] reserved after the commit,
// then pairs of (member, seats) of holds to give back. A missing
// counter is built from the commit, which is the authority's state as of
// its seq (so signups need no rebuild query). Commits applied out of order
// (several instances) never step back: taken and waiting are set only
// when the seq is newer than the counter's, capacity and waitlist only
// when the updated_at is, the pools when either is (a commit later than
// another has neither an older seq nor an older updated_at); holds are
// given back only when still in the counter's holds. Returns 0 when nothing was done (a failed commit and no
// counter), 2 when the counter was built, else 1.
var settleScript = redis.NewScript(holdsLua + `
local seq = tonumber(ARGV[1])
prune()
if redis.call('EXISTS', KEYS[1]) == 0 then
  if seq < 0 then return 0 end
  redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'held', 0, 'capacity', ARGV[4], 'waiting', ARGV[3],
    'waitlist', ARGV[5], 'version', ARGV[6], 'seq', ARGV[1], 'gen', ARGV[8], 'fill', ARGV[9], 'pools', ARGV[10],
    'reserved', ARGV[11])
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  return 2
end
if seq >= 0 then
  local newer = false
  if seq > tonumber(redis.call('HGET', KEYS[1], 'seq') or '-1') then
    redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'waiting', ARGV[3], 'seq', ARGV[1], 'reserved', ARGV[11])
    newer = true
  end
  if tonumber(ARGV[6]) > tonumber(redis.call('HGET', KEYS[1], 'version') or '-1') then
    redis.call('HSET', KEYS[1], 'capacity', ARGV[4], 'waitlist', ARGV[5], 'version', ARGV[6], 'fill', ARGV[9])
    newer = true
  end
  if newer then redis.call('HSET', KEYS[1], 'pools', ARGV[10]) end
end
give_back(12)
return 1
`)

// buildScript writes a counter from the authority, only if none exists.
//
// KEYS[1] the counter, KEYS[2] its holds (dropped with a build); ARGV[1]
// taken, ARGV[2] capacity, ARGV[3] waiting,
// ARGV[4] waitlist (0/1), ARGV[5] seq, ARGV[6] TTL in milliseconds,
// ARGV[7] a fresh generation, ARGV[8] the activity's updated_at (unix
// microseconds), ARGV[9] fill (0/1), ARGV[10] the activity's pools,
// ARGV[11] reserved.
// Returns 1 when written, 0 when a counter was already there (which gets
// the pools only if it had none: one written before pools existed). The
// TTL is set here only: a hot counter is still rebuilt from the authority
// every TTL.
var buildScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSETNX', KEYS[1], 'pools', ARGV[10])
  return 0
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'taken', ARGV[1], 'held', 0, 'capacity', ARGV[2], 'waiting', ARGV[3],
  'waitlist', ARGV[4], 'seq', ARGV[5], 'gen', ARGV[7], 'version', ARGV[8], 'fill', ARGV[9], 'pools', ARGV[10],
  'reserved', ARGV[11])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
`)

// correctScript resets the counter of a given generation to the authority,
// dropping its holds.
//
// KEYS[1] the counter, KEYS[2] its holds; ARGV[1] the generation, ARGV[2] taken, ARGV[3]
// waiting, ARGV[4] seq, ARGV[5] reserved. Returns 1 when corrected, 0
// otherwise.
var correctScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'waiting', ARGV[3], 'seq', ARGV[4], 'held', 0, 'reserved', ARGV[5])
redis.call('DEL', KEYS[2])
return 1
`)

// script is one run of a script: the script, its keys and its arguments.
type script struct {
	s    *redis.Script
	keys []string
	args []any
}

// runScripts runs the scripts in one pipeline, by hash, and returns their
// commands (each with its own result or error) and the first error. A
// script that Redis did not know (it lost its script cache: that node of
// a cluster only, perhaps) is sent again with its source, alone of the
// pipeline's, so that no script runs twice. On a Redis Cluster the
// pipeline is split by node: scripts on keys of different slots are fine.
func runScripts(ctx context.Context, rdb redis.UniversalClient, runs []script) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(runs))
	pipe := rdb.Pipeline()
	for i, r := range runs {
		cmds[i] = r.s.EvalSha(ctx, pipe, r.keys, r.args...)
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := rdb.Pipeline()
		for _, i := range again {
			cmds[i] = runs[i].s.Eval(ctx, pipe, runs[i].keys, runs[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return cmds, err
		}
	}
	return cmds, nil
}
