package capacity

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The display counter of an activity is one Redis hash (see Key) with the
// fields:
//
//	taken     occupying registrations at the authority as of seq
//	waiting   waitlisted registrations as of seq
//	seq       the activity's last event seq that taken and waiting reflect
//	held      seats held for signups in flight (given back after their transaction)
//	capacity  the activity's capacity
//	waitlist  1 when the activity keeps a waiting list, else 0
//	fill      1 under the waiting-list policy fill, else 0 (strict)
//	version   the activity's updated_at (unix microseconds) that capacity,
//	          waitlist and fill reflect
//	gen       the counter's generation: a new one at every build
//
// The display shows taken+held: signups in flight count as taken at once,
// so the display errs towards fewer seats left. Every script below is one
// atomic step on it.

// admitLua is the Lua form of registration.Admit, the one admission rule
// (a Redis script cannot call Go): a signup for seats takes them when that
// many are free and nobody waits (strict) or whoever waits (fill); else
// it joins the waiting list when the activity keeps one; else it is
// refused as full. taken is the counter's taken + held. It is written here
// once, and TestTheGateAdmitsAsTheRule requires it to answer as
// registration.Admit on the same counts: change both together.
const admitLua = `
local function admit(capacity, taken, waiting, waitlist, fill, seats)
  if capacity - taken >= seats and (waiting == 0 or fill) then return 'seat' end
  if waitlist then return 'waitlist' end
  return 'full'
end
`

// reserveScript holds seats for a signup, as admitLua answers on the
// counter's fields.
//
// KEYS[1] the counter, ARGV[1] the seats asked for. Returns {-1} when the
// counter is missing (it never creates it), {-3} when the signup joins
// the waiting list, {-2} when it is refused as full, else {1, gen} after
// adding the seats to held.
var reserveScript = redis.NewScript(admitLua + `
local v = redis.call('HMGET', KEYS[1], 'taken', 'held', 'capacity', 'waiting', 'waitlist', 'gen', 'fill')
if not v[1] or not v[3] then return {-1} end
local seats = tonumber(ARGV[1])
local a = admit(tonumber(v[3]), tonumber(v[1]) + tonumber(v[2] or '0'), tonumber(v[4] or '0'), v[5] == '1',
  v[7] == '1', seats)
if a == 'waitlist' then return {-3} end
if a == 'full' then return {-2} end
redis.call('HINCRBY', KEYS[1], 'held', seats)
return {1, v[6]}
`)

// settleScript applies one commit of the activity's change transaction.
//
// KEYS[1] the counter. ARGV[1] the commit's last seq (-1 for a failed
// transaction: nothing to apply but the holds), ARGV[2] taken, ARGV[3]
// waiting, ARGV[4] capacity and ARGV[5] waitlist (0/1) after the commit,
// ARGV[6] the activity's updated_at after the commit (unix microseconds:
// every change of capacity or waitlist moves it forward), ARGV[7] a TTL
// in milliseconds, ARGV[8] a fresh generation for a counter built here
// and ARGV[9] fill (0/1), then pairs of (generation, seats) of holds to
// give back. A missing
// counter is built from the commit, which is the authority's state as of
// its seq (so signups need no rebuild query). Commits applied out of order
// (several instances) never step back: taken and waiting are set only
// when the seq is newer than the counter's, capacity and waitlist only
// when the updated_at is; holds are given back only to the generation they
// were taken in. Returns 0 when nothing was done (a failed commit and no
// counter), 2 when the counter was built, else 1.
var settleScript = redis.NewScript(`
local seq = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  if seq < 0 then return 0 end
  redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'held', 0, 'capacity', ARGV[4], 'waiting', ARGV[3],
    'waitlist', ARGV[5], 'version', ARGV[6], 'seq', ARGV[1], 'gen', ARGV[8], 'fill', ARGV[9])
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  return 2
end
if seq >= 0 then
  if seq > tonumber(redis.call('HGET', KEYS[1], 'seq') or '-1') then
    redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'waiting', ARGV[3], 'seq', ARGV[1])
  end
  if tonumber(ARGV[6]) > tonumber(redis.call('HGET', KEYS[1], 'version') or '-1') then
    redis.call('HSET', KEYS[1], 'capacity', ARGV[4], 'waitlist', ARGV[5], 'version', ARGV[6], 'fill', ARGV[9])
  end
end
local gen = redis.call('HGET', KEYS[1], 'gen')
for i = 10, #ARGV, 2 do
  if ARGV[i] == gen then
    local n = math.min(tonumber(redis.call('HGET', KEYS[1], 'held') or '0'), tonumber(ARGV[i + 1]))
    if n > 0 then redis.call('HINCRBY', KEYS[1], 'held', -n) end
  end
end
return 1
`)

// buildScript writes a counter from the authority, only if none exists.
//
// KEYS[1] the counter; ARGV[1] taken, ARGV[2] capacity, ARGV[3] waiting,
// ARGV[4] waitlist (0/1), ARGV[5] seq, ARGV[6] TTL in milliseconds,
// ARGV[7] a fresh generation, ARGV[8] the activity's updated_at (unix
// microseconds), ARGV[9] fill (0/1). Returns 1 when written, 0 when a counter was
// already there. The TTL is set here only: a hot counter is still rebuilt
// from the authority every TTL.
var buildScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'taken', ARGV[1], 'held', 0, 'capacity', ARGV[2], 'waiting', ARGV[3],
  'waitlist', ARGV[4], 'seq', ARGV[5], 'gen', ARGV[7], 'version', ARGV[8], 'fill', ARGV[9])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
`)

// correctScript resets the counter of a given generation to the authority,
// dropping its holds.
//
// KEYS[1] the counter; ARGV[1] the generation, ARGV[2] taken, ARGV[3]
// waiting, ARGV[4] seq. Returns 1 when corrected, 0 otherwise.
var correctScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'taken', ARGV[2], 'waiting', ARGV[3], 'seq', ARGV[4], 'held', 0)
return 1
`)

// runScripts runs script once per argument list in one pipeline, by hash;
// if Redis lost its script cache, the pipeline is sent again with the
// scripts' source.
func runScripts(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, keys [][]string, args [][]any) error {
	send := func(eval bool) error {
		pipe := rdb.Pipeline()
		for i := range keys {
			if eval {
				s.Eval(ctx, pipe, keys[i], args[i]...)
			} else {
				s.EvalSha(ctx, pipe, keys[i], args[i]...)
			}
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err := send(false)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		err = send(true)
	}
	return err
}
