// The door page's scanner: keyboard-wedge and camera scans, redeemed
// online through the API with the session, or decided on the device from
// its own copy of the list when the service cannot be reached, kept in
// IndexedDB and uploaded (forced, with the time of the scan) when it can
// be again. Every word comes from the page's catalogue (#door-config).
// No inline script: the page's content security policy allows none.
(function () {
  'use strict';

  var cfgEl = document.getElementById('door-config');
  var root = document.getElementById('door');
  if (!cfgEl || !root) { return; }
  var cfg = JSON.parse(cfgEl.textContent);
  var words = cfg.words || {};
  var lang = document.documentElement.lang || 'en';
  var listID = cfg.list.id;
  var api = cfg.api;
  var csrf = document.body.dataset.csrf;

  // Timings (milliseconds).
  var REDEEM_TIMEOUT = 6000;   // an online scan waits this long, then is decided here
  var PROBE_EVERY = 4000;      // offline, the service is asked this often whether it is back
  var RETRY_EVERY = 15000;     // online, uploads that the service refused for a while are tried again this often
  var KEYS_EVERY = 300000;     // the key set and the list's rules are read again this often
  var SYNC_WAIT = 25;          // seconds a long poll of the ticket sync waits
  var SYNC_LIMIT = 1000;       // registrations per page of the ticket sync
  var WEDGE_GAP = 1000;        // a pause longer than this between keys starts a new scan
  var CAMERA_SAME = 4000;      // a code seen again within this long is the same scan
  var CAMERA_EVERY = 120;      // the camera's picture is read this often (without BarcodeDetector)

  // t is the page's words for key, with %s and %d filled in order.
  function t(key) {
    var args = Array.prototype.slice.call(arguments, 1);
    var msg = Object.prototype.hasOwnProperty.call(words, key) ? words[key] : '[door.' + key + ']';
    var i = 0;
    return msg.replace(/%[sd]/g, function () { var v = args[i++]; return v === undefined ? '' : String(v); });
  }

  function $(id) { return document.getElementById(id); }

  function when(iso) {
    var d = new Date(iso);
    if (isNaN(d)) { return ''; }
    var same = d.toDateString() === new Date().toDateString();
    return same ? d.toLocaleTimeString(lang) : d.toLocaleString(lang);
  }

  // ---- IndexedDB: the device's copy of the list, its scans, its state.

  var dbp = null;
  function db() {
    if (dbp) { return dbp; }
    dbp = new Promise(function (resolve, reject) {
      var open = indexedDB.open('capacityd-door', 1);
      open.onupgradeneeded = function () {
        var d = open.result;
        d.createObjectStore('meta', { keyPath: 'k' });
        var tickets = d.createObjectStore('tickets', { keyPath: ['list', 'registration_id'] });
        tickets.createIndex('user', ['list', 'user_id']);
        var scans = d.createObjectStore('scans', { keyPath: 'id', autoIncrement: true });
        scans.createIndex('state', ['list', 'state', 'id']);
        scans.createIndex('reg', ['list', 'reg', 'id']);
      };
      open.onsuccess = function () { resolve(open.result); };
      open.onerror = function () { reject(open.error); };
    });
    return dbp;
  }

  // tx runs fn(stores...) in one transaction and resolves with what fn
  // returned once the transaction is durable.
  function tx(names, mode, fn) {
    return db().then(function (d) {
      return new Promise(function (resolve, reject) {
        var x = d.transaction(names, mode, { durability: 'strict' });
        var out;
        x.oncomplete = function () { Promise.resolve(out).then(resolve, reject); };
        x.onerror = function () { reject(x.error); };
        x.onabort = function () { reject(x.error || new Error('aborted')); };
        out = fn.apply(null, names.map(function (n) { return x.objectStore(n); }));
      });
    });
  }

  function req(r) {
    return new Promise(function (resolve, reject) {
      r.onsuccess = function () { resolve(r.result); };
      r.onerror = function () { reject(r.error); };
    });
  }

  function metaGet(k) { return tx(['meta'], 'readonly', function (m) { return req(m.get(k)); }).then(function (r) { return r ? r.v : undefined; }); }
  // metaPut keeps k; the list's own keys not once the device is
  // forgetting the list (a count, a conflict or the list's rules that
  // arrive after the copy was removed would bring part of it back). The
  // check and the transaction are in one turn, so a write that passed it
  // is ordered before the forgetting transaction.
  function metaPut(k, v) {
    if (S.forgotten && k.indexOf(listID + ':') === 0) { return Promise.resolve(); }
    return tx(['meta'], 'readwrite', function (m) { m.put({ k: k, v: v }); });
  }
  function mk(name) { return listID + ':' + name; }

  // ---- State.

  var S = {
    online: navigator.onLine,
    // auth is what keeps the page from writing: 'session' (signed out),
    // 'token' (a write refused: the page's token is not the session's,
    // or the door is no longer the user's), or ''.
    auth: '',
    list: cfg.list,
    counts: { checked_in: cfg.list.checked_in, inside: cfg.list.inside, max_inside: cfg.list.max_inside, conflicts: cfg.list.conflicts },
    keys: new Map(),
    keysAt: 0,
    cursor: null,
    complete: false,
    syncStart: 0,
    tickets: 0,
    queued: 0,
    uploading: false,
    worker: !('serviceWorker' in navigator) ? 'unsupported' : 'pending',
    ready: false,
    mode: 'entry',
    device: '',
    sound: true,
    feedAfter: 0,
    conflicts: [],
    failed: [],
    results: 0
  };

  // ---- What the page shows.

  var audio = null;
  function beep(ok) {
    if (S.sound) {
      try {
        audio = audio || new (window.AudioContext || window.webkitAudioContext)();
        var at = audio.currentTime;
        (ok ? [[880, 0, 0.12]] : [[220, 0, 0.18], [220, 0.26, 0.18]]).forEach(function (b) {
          var o = audio.createOscillator(), g = audio.createGain();
          o.type = 'square';
          o.frequency.value = b[0];
          g.gain.value = 0.08;
          o.connect(g).connect(audio.destination);
          o.start(at + b[1]);
          o.stop(at + b[1] + b[2]);
        });
      } catch (e) { /* no sound on this device */ }
    }
    if (navigator.vibrate) {
      try { navigator.vibrate(ok ? 80 : [200, 100, 200]); } catch (e) { /* not allowed */ }
    }
  }

  function setText(id, text) {
    var el = $(id);
    el.textContent = text || '';
    el.hidden = !text;
  }

  // show puts a result on the big panel: r.outcome (entered, exited,
  // refused, waitlisted), r.reason (a refusal's code), r.user, r.seats,
  // r.previous ({at, device}), r.inside/r.max, r.local (decided here).
  function show(r) {
    var el = $('result');
    S.results++;
    el.dataset.outcome = r.outcome;
    el.dataset.reason = r.reason || '';
    el.dataset.decided = r.local ? 'device' : 'service';
    el.dataset.seq = String(S.results);
    if (r.ms !== undefined) { el.dataset.ms = r.ms.toFixed(1); }
    var title = t(r.outcome === 'refused' && r.type === 'exit' ? 'outcome.refused_exit' : 'outcome.' + r.outcome);
    $('result-words').textContent = title;
    var reason = '';
    if (r.outcome === 'refused') {
      reason = Object.prototype.hasOwnProperty.call(words, 'refused.' + r.reason) ? t('refused.' + r.reason) : t('refused.other') + ' ' + (r.message || r.reason);
    } else if (r.outcome === 'waitlisted') {
      reason = t('walkin.waitlisted');
    }
    setText('result-reason', reason);
    setText('result-who', r.user ? t('who', r.user, r.seats || 1) : '');
    var prev = '';
    if (r.reason === 'already_checked_in') {
      prev = r.previous && r.previous.at ? t('previous', when(r.previous.at), r.previous.device) : t('previous_synced');
    }
    setText('result-previous', prev);
    setText('result-room', r.max ? t('room', r.inside, r.max) : '');
    var notes = [];
    if (r.local && r.outcome !== 'refused') { notes.push(t('decided_here')); }
    if (r.local && r.outcome === 'refused') { notes.push(t('refused_here')); }
    if (r.unknown) { notes.push(t('unknown_registration')); }
    if (r.replayed) { notes.push(t('replayed')); }
    setText('result-note', notes.join(' '));
    $('announce').textContent = [title, reason, prev].filter(Boolean).join(' ');
    beep(r.outcome === 'entered' || r.outcome === 'exited');
  }

  function renderCounts() {
    var c = S.counts;
    $('count-checked-in').textContent = String(c.checked_in);
    $('count-inside').textContent = String(c.inside);
    $('count-max').textContent = c.max_inside ? String(c.max_inside) : t('no_limit');
    $('count-conflicts').textContent = String(c.conflicts);
  }

  function renderStatus() {
    var net = S.auth ? 'signed_out' : (S.online ? 'online' : 'offline');
    root.dataset.online = S.online ? '1' : '0';
    root.dataset.net = net;
    root.dataset.queue = String(S.queued);
    root.dataset.tickets = String(S.tickets);
    root.dataset.ready = S.ready ? '1' : '0';
    $('net').dataset.state = net;
    $('net-words').textContent = t('net.' + net);
    var ready;
    if (S.worker === 'unsupported') {
      ready = t('ready.unsupported');
    } else {
      ready = S.ready ? t('ready.yes', S.tickets) : t('ready.no');
    }
    $('net-ready').textContent = ready;
    var q = '';
    if (S.queued > 0) { q = S.uploading && S.online ? t('queue.uploading', S.queued) : t('queue.waiting', S.queued); }
    setText('net-queue', q);
    renderAttention();
  }

  function renderAttention() {
    var list = $('attention-list');
    list.textContent = '';
    S.failed.forEach(function (f) {
      var li = document.createElement('li');
      li.dataset.kind = 'failed';
      li.textContent = t('failed.item', f.user || f.reg || '', when(f.at), f.message || '');
      list.appendChild(li);
    });
    S.conflicts.forEach(function (c) {
      var li = document.createElement('li');
      li.dataset.kind = 'conflict';
      li.dataset.conflict = c.conflict;
      li.dataset.registration = c.registration_id;
      li.textContent = t('conflict.item', c.user_id, t('conflict.' + c.conflict), when(c.at), c.device);
      list.appendChild(li);
    });
    $('attention').hidden = S.failed.length === 0 && S.conflicts.length === 0;
  }

  // ---- The network: online until a request fails, then offline until
  // the service answers again.

  var probeTimer = null;

  // reads are the requests in flight that only read (the sync's long
  // poll): they are dropped when the device goes offline, as a network
  // that went away would drop them.
  var reads = new Set();

  // call is fetch with a deadline and the session's CSRF token; it
  // rejects (err.network) when the service could not be reached, and
  // marks the page offline.
  function call(url, opts, ms) {
    opts = opts || {};
    var ctl = new AbortController();
    var timer = setTimeout(function () { ctl.abort(); }, ms || REDEEM_TIMEOUT);
    opts.signal = ctl.signal;
    var read = !opts.method || opts.method === 'GET';
    if (read) { reads.add(ctl); }
    opts.credentials = 'same-origin';
    opts.headers = opts.headers || {};
    opts.headers['X-CSRF-Token'] = csrf;
    return fetch(url, opts).then(function (res) {
      clearTimeout(timer);
      reads.delete(ctl);
      if (res.status === 401 || res.redirected) {
        S.auth = 'session';
        renderStatus();
      } else if (res.status < 500) {
        if (S.auth === 'session' || (S.auth === 'token' && !read && res.ok)) { S.auth = ''; renderStatus(); }
        goOnline();
      }
      return res;
    }, function (err) {
      clearTimeout(timer);
      reads.delete(ctl);
      goOffline();
      err.network = true;
      throw err;
    });
  }

  function goOffline() {
    if (S.online) {
      S.online = false;
      reads.forEach(function (c) { c.abort(); });
      reads.clear();
      renderStatus();
    }
    if (!probeTimer) { probeTimer = setInterval(probe, PROBE_EVERY); }
  }

  function goOnline() {
    if (probeTimer) { clearInterval(probeTimer); probeTimer = null; }
    if (!S.online) {
      S.online = true;
      renderStatus();
      kickSync();
    }
    if (S.queued > 0) { flush(); }
  }

  // probe asks for the list (its rules may have changed too).
  function probe() {
    if (navigator.onLine === false) { return; }
    call(api + '/checkin-lists/' + listID, { method: 'GET' }, 5000).then(function (res) {
      if (res.ok) { return res.json().then(keepList); }
    }).catch(function () { /* still offline */ });
  }

  function keepList(l) {
    S.list = { id: l.id, name: l.name, activity_ids: l.activity_ids, entry: l.entry, max_inside: l.max_inside,
      opens_at: l.opens_at, closes_at: l.closes_at };
    return metaPut(mk('list'), { list: S.list, at: Date.now() });
  }

  // ---- Keys and tickets: the device's copy.

  function b64url(s) {
    s = s.replace(/-/g, '+').replace(/_/g, '/');
    while (s.length % 4) { s += '='; }
    var bin = atob(s);
    var out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { out[i] = bin.charCodeAt(i); }
    return out;
  }

  function importKeys(set) {
    var keys = new Map();
    return Promise.all((set.keys || []).map(function (k) {
      return crypto.subtle.importKey('jwk', { kty: 'OKP', crv: 'Ed25519', x: k.x }, { name: 'Ed25519' }, false, ['verify'])
        .then(function (key) { keys.set(k.kid, key); }, function () { /* a key this browser cannot use */ });
    })).then(function () { S.keys = keys; });
  }

  // refresh reads the key set and the list's rules again: a device
  // keeps them to decide offline.
  function refresh() {
    // Read again in KEYS_EVERY, or in 10 s if this read fails.
    S.keysAt = Date.now() - KEYS_EVERY + 10000;
    var keys = call(api + '/checkin/keys', { method: 'GET' }, 10000).then(function (res) {
      if (!res.ok) { return; }
      return res.json().then(function (set) {
        S.keysAt = Date.now();
        return importKeys(set).then(function () { return metaPut('keys', set); });
      });
    });
    var list = call(api + '/checkin-lists/' + listID, { method: 'GET' }, 10000).then(function (res) {
      if (res.ok) { return res.json().then(keepList); }
    });
    return Promise.all([keys, list]).catch(function () { /* what was kept stays */ });
  }

  // verify checks a ticket's signature with the kept keys: its
  // registration and activity, or why it is refused.
  function verify(ticket) {
    var parts = ticket.split('.');
    if (ticket.length > 2048 || parts.length !== 3) { return Promise.resolve({ refused: 'invalid_ticket' }); }
    var header, claims;
    try {
      header = JSON.parse(new TextDecoder().decode(b64url(parts[0])));
      claims = JSON.parse(new TextDecoder().decode(b64url(parts[1])));
    } catch (e) {
      return Promise.resolve({ refused: 'invalid_ticket' });
    }
    if (header.alg !== 'EdDSA' || !header.kid || header.typ === 'capacityd-attendance+jwt') { return Promise.resolve({ refused: 'invalid_ticket' }); }
    var key = S.keys.get(header.kid);
    if (!key) { return Promise.resolve({ refused: 'unknown_key' }); }
    return crypto.subtle.verify({ name: 'Ed25519' }, key, b64url(parts[2]), new TextEncoder().encode(parts[0] + '.' + parts[1]))
      .then(function (ok) {
        if (!ok || !claims.reg || !claims.act) { return { refused: 'invalid_ticket' }; }
        return { reg: claims.reg, act: claims.act };
      }, function () { return { refused: 'invalid_ticket' }; });
  }

  var syncRunning = false;
  var syncWake = null;

  function kickSync() {
    if (syncWake) { var w = syncWake; syncWake = null; w(); }
    if (!syncRunning) { syncLoop(); }
  }

  function pause(ms) {
    return new Promise(function (resolve) {
      var timer = setTimeout(function () { syncWake = null; resolve(); }, ms);
      syncWake = function () { clearTimeout(timer); resolve(); };
    });
  }

  // syncLoop reads every registration of the list, page by page, then
  // follows its changes with a long poll, for as long as the page is
  // open.
  function syncLoop() {
    syncRunning = true;
    var step = function () {
      if (!S.online) { return pause(PROBE_EVERY).then(step); }
      if (Date.now() - S.keysAt > KEYS_EVERY) { return refresh().then(step); }
      var url = api + '/checkin-lists/' + listID + '/tickets?limit=' + SYNC_LIMIT;
      if (S.cursor) { url += '&cursor=' + encodeURIComponent(S.cursor); }
      if (S.complete) { url += '&wait=' + SYNC_WAIT; }
      var started = Date.now();
      return call(url, { method: 'GET' }, (SYNC_WAIT + 15) * 1000).then(function (res) {
        if (res.status === 400) {
          // A cursor the service no longer knows: the whole list again.
          S.cursor = null;
          S.complete = false;
          return pause(1000);
        }
        if (!res.ok) { return pause(PROBE_EVERY); }
        return res.json().then(function (page) { return applySync(page, started); });
      }, function () { return pause(1000); }).then(step);
    };
    step().catch(function (err) {
      syncRunning = false;
      if (window.console) { console.error('door sync', err); }
      setTimeout(kickSync, PROBE_EVERY);
    });
  }

  // applySync keeps one page of the sync and the cursor after it in one
  // transaction.
  function applySync(page, started) {
    if (S.forgotten) { return Promise.resolve(); }
    var caughtUp = page.items.length < SYNC_LIMIT;
    var state = { cursor: page.next_cursor, complete: S.complete || caughtUp, syncStart: caughtUp ? started : S.syncStart };
    return tx(['tickets', 'meta'], 'readwrite', function (tickets, meta) {
      page.items.forEach(function (it) {
        it.list = listID;
        tickets.put(it);
      });
      meta.put({ k: mk('sync'), v: state });
      return req(tickets.count(IDBKeyRange.bound([listID, ''], [listID, '\uffff'])));
    }).then(function (n) {
      S.cursor = state.cursor;
      S.complete = state.complete;
      S.syncStart = state.syncStart;
      S.tickets = n;
      checkReady();
    });
  }

  // record is what the device knows of a registration on the list: its
  // copy from the sync, with the scans this device made that the copy
  // does not hold yet, and this device's first entry of it.
  function record(reg) {
    return tx(['tickets', 'scans'], 'readonly', function (tickets, scans) {
      return Promise.all([
        req(tickets.get([listID, reg])),
        req(scans.index('reg').getAll(IDBKeyRange.bound([listID, reg, 0], [listID, reg, Infinity])))
      ]);
    }).then(function (got) {
      var base = got[0], mine = got[1];
      var rec = base ? Object.assign({}, base) : null;
      var first = null;
      mine.forEach(function (s) {
        if (s.type === 'entry' && !first) { first = { at: s.at, device: s.device }; }
        var unseen = s.state === 'queued' || (s.ackedAt || 0) > S.syncStart;
        if (!unseen) { return; }
        if (!rec) { rec = { registration_id: reg, activity_id: s.act, user_id: s.user, seats: s.seats || 1, valid: true, inside: false, entries: 0 }; }
        if (s.type === 'entry') { rec.entries++; rec.inside = true; } else { rec.inside = false; }
      });
      if (rec) { rec.first = first; }
      return rec;
    });
  }

  // ---- Deciding a scan.

  function codeOf(text) {
    text = text.trim();
    if (!text) { return null; }
    if (/^r_[0-9A-Za-z]+$/.test(text)) { return { kind: 'registration_id', code: text }; }
    return { kind: 'ticket', code: text };
  }

  var queue = Promise.resolve();

  // scan redeems a scanned text, one at a time, in the order scanned.
  function scan(text) {
    var item = codeOf(text);
    if (!item) { return queue; }
    queue = queue.then(function () { return decide(item, S.mode); }).catch(function (err) {
      if (window.console) { console.error('door scan', err); }
    });
    return queue;
  }

  function decide(item, type) {
    var t0 = performance.now();
    var at = new Date().toISOString();
    var first = S.online && S.auth !== 'session' ? online(item, type) : Promise.resolve({ offline: true });
    return first.then(function (r) {
      return r.offline ? local(item, type, at, r.probe) : r;
    }).then(function (r) {
      r.ms = performance.now() - t0;
      r.type = type;
      show(r);
      renderCounts();
      renderStatus();
    });
  }

  // online redeems the scan at the service; { offline: true } when it
  // could not be reached (probe: the key of a request that may have
  // arrived all the same).
  function online(item, type) {
    var key = crypto.randomUUID();
    var body = { type: type, device: S.device };
    body[item.kind] = item.code;
    return call(api + '/checkin-lists/' + listID + '/redeem', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
      body: JSON.stringify(body)
    }).then(function (res) {
      if (res.status === 401 || res.redirected) { return { offline: true }; }
      if (res.status >= 500) {
        goOffline();
        return { offline: true, probe: res.status === 503 ? null : { key: key, body: body } };
      }
      var replayed = res.headers.get('Idempotent-Replayed') === 'true';
      return res.json().catch(function () { return null; }).then(function (j) {
        if (!j) {
          // Not the API's answer (a proxy's page): the scan may have been
          // recorded, or not.
          return res.ok ? { offline: true, probe: { key: key, body: body } } : { outcome: 'refused', reason: 'other', message: 'HTTP ' + res.status };
        }
        if (res.ok) {
          return remember(item, type, j).then(function () {
            return { outcome: j.result, user: j.registration.user_id, seats: j.registration.seats, replayed: replayed,
              inside: j.inside, max: j.max_inside && j.result === 'entered' && j.inside >= j.max_inside ? j.max_inside : 0 };
          });
        }
        var e = j.error || {};
        var r = { outcome: 'refused', reason: e.code, message: e.message, previous: e.previous };
        if (e.code === 'room_full') { r.inside = e.inside; r.max = e.max_inside; }
        return r;
      });
    }, function () {
      return { offline: true, probe: { key: key, body: body } };
    });
  }

  // remember keeps an online scan on the device, so that the device
  // knows it offline before the sync brings it.
  function remember(item, type, j) {
    S.counts.inside = j.inside;
    var s = { list: listID, reg: j.registration.id, act: j.registration.activity_id, user: j.registration.user_id,
      seats: j.registration.seats, type: type, device: S.device, at: j.checkin.at, state: 'online', ackedAt: Date.now() };
    return tx(['scans'], 'readwrite', function (scans) { scans.add(s); });
  }

  // local decides the scan from the device's copy, as the service would
  // have, and keeps an accepted one to upload.
  function local(item, type, at, probe) {
    var claims = item.kind === 'ticket' ? verify(item.code) : Promise.resolve({ reg: item.code });
    return claims.then(function (c) {
      if (c.refused) { return { outcome: 'refused', reason: c.refused, local: true }; }
      return record(c.reg).then(function (rec) { return rule(item, type, at, c, rec, probe); });
    });
  }

  function rule(item, type, at, c, rec, probe) {
    var l = S.list;
    var refuse = function (reason, extra) { return Object.assign({ outcome: 'refused', reason: reason, local: true, user: rec && rec.user_id, seats: rec && rec.seats }, extra || {}); };
    if (!rec && item.kind === 'registration_id') { return refuse('not_found'); }
    var act = c.act || rec.activity_id;
    if (rec && !rec.valid) { return refuse('ticket_revoked'); }
    if (l.activity_ids.indexOf(act) < 0) { return refuse('wrong_list'); }
    var now = new Date(at);
    if ((l.opens_at && now < new Date(l.opens_at)) || (l.closes_at && now >= new Date(l.closes_at))) { return refuse('checkin_closed'); }
    var seats = rec ? rec.seats || 1 : 1;
    var inside = !!(rec && rec.inside);
    if (type === 'exit') {
      if (!inside) { return refuse('not_inside'); }
    } else {
      var entries = rec ? rec.entries : 0;
      if ((l.entry === 'once' && entries > 0) || (l.entry === 'reentry' && inside)) {
        return refuse('already_checked_in', { previous: rec.first });
      }
      if (l.max_inside && !inside && S.counts.inside + seats > l.max_inside) {
        return refuse('room_full', { inside: S.counts.inside, max: l.max_inside });
      }
    }
    var s = { list: listID, kind: item.kind, code: item.code, reg: c.reg, act: act, user: rec ? rec.user_id : '', seats: seats,
      type: type, device: S.device, at: at, key: crypto.randomUUID(), probe: probe || null, state: 'queued' };
    if (type === 'entry') {
      if (!rec || rec.entries === 0) { S.counts.checked_in++; }
      if (!inside) { S.counts.inside += seats; }
    } else {
      S.counts.inside = Math.max(0, S.counts.inside - seats);
    }
    var counts = Object.assign({}, S.counts);
    return tx(['scans', 'meta'], 'readwrite', function (scans, meta) {
      scans.add(s);
      meta.put({ k: mk('counts'), v: { counts: counts, at: Date.now() } });
    }).then(function () {
      S.queued++;
      return { outcome: type === 'entry' ? 'entered' : 'exited', user: s.user, seats: seats, local: true, unknown: !rec };
    });
  }

  // ---- Uploading what was decided offline: oldest first, each scan
  // with its own key (kept with it), so that an upload cut off and sent
  // again is one scan.

  function flush() {
    if (S.uploading || !S.online || S.auth) { return; }
    S.uploading = true;
    renderStatus();
    var next = function () {
      return tx(['scans'], 'readonly', function (scans) {
        return req(scans.index('state').get(IDBKeyRange.bound([listID, 'queued', 0], [listID, 'queued', Infinity])));
      }).then(function (s) {
        if (!s) { return; }
        return upload(s).then(function (more) { if (more) { return next(); } });
      });
    };
    next().catch(function (err) {
      if (window.console) { console.error('door upload', err); }
    }).then(function () {
      S.uploading = false;
      return countQueued();
    }).then(renderStatus);
  }

  function send(body, key) {
    return call(api + '/checkin-lists/' + listID + '/redeem', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
      body: JSON.stringify(body)
    }, 15000);
  }

  // upload sends one kept scan; it resolves false when the uploads must
  // wait (offline, signed out, the service failing).
  function upload(s) {
    var probed = s.probe ? send(s.probe.body, s.probe.key).then(function (res) {
      if (res.ok) { return res.json().then(function (j) { return done(s, j); }); }
      if (res.status === 409 || res.status === 404) { return 'forced'; }
      return answer(s, res);
    }) : Promise.resolve('forced');
    return probed.then(function (next) {
      if (next !== 'forced') { return next; }
      var body = { type: s.type, device: s.device, force: true, at: s.at };
      body[s.kind] = s.code;
      return send(body, s.key).then(function (res) {
        if (res.ok) { return res.json().then(function (j) { return done(s, j); }); }
        return answer(s, res);
      });
    }, function () { return false; }).catch(function () { return false; });
  }

  // answer handles a refused upload: kept for later when the service or
  // the session failed, set aside (shown to the staff) when the service
  // will never take it.
  function answer(s, res) {
    if (res.status === 403) {
      // The session's token is not the page's (signed in again since the
      // page was kept), or the door is no longer the user's.
      S.auth = 'token';
      renderStatus();
      return false;
    }
    if (res.status === 401 || res.redirected || res.status >= 500) { return false; }
    return res.json().catch(function () { return {}; }).then(function (j) {
      var e = j.error || {};
      s.state = 'failed';
      s.message = e.message || String(res.status);
      S.failed.push({ user: s.user, reg: s.reg, at: s.at, message: s.message });
      return tx(['scans'], 'readwrite', function (scans) { scans.put(s); }).then(function () { return true; });
    });
  }

  function done(s, j) {
    s.state = j.checkin && j.checkin.conflict ? 'conflict' : 'sent';
    s.conflict = j.checkin ? j.checkin.conflict : null;
    s.seq = j.checkin ? j.checkin.seq : 0;
    s.ackedAt = Date.now();
    s.user = s.user || (j.registration && j.registration.user_id) || '';
    return tx(['scans'], 'readwrite', function (scans) { scans.put(s); }).then(function () {
      S.queued = Math.max(0, S.queued - 1);
      if (s.conflict) { followConflicts(); }
      renderStatus();
      return true;
    });
  }

  function countQueued() {
    return tx(['scans'], 'readonly', function (scans) {
      return req(scans.index('state').count(IDBKeyRange.bound([listID, 'queued', 0], [listID, 'queued', Infinity])));
    }).then(function (n) { S.queued = n; });
  }

  // ---- The list's counts, live, and its conflicts.

  function stream() {
    var es = new EventSource(api + '/checkin-lists/' + listID + '/stream');
    // A stream the browser gave up on (an answer that was not a stream:
    // signed out, the service failing) is opened again later.
    es.addEventListener('error', function () {
      if (es.readyState === EventSource.CLOSED) { setTimeout(stream, PROBE_EVERY); }
    });
    es.addEventListener('counts', function (e) {
      var c;
      try { c = JSON.parse(e.data); } catch (err) { return; }
      var more = c.conflicts > S.counts.conflicts;
      S.counts = { checked_in: c.checked_in, inside: c.inside, max_inside: c.max_inside, conflicts: c.conflicts };
      S.list.max_inside = c.max_inside;
      root.dataset.counted = String(Date.now());
      renderCounts();
      metaPut(mk('counts'), { counts: S.counts, at: Date.now() });
      if (more || (c.conflicts > 0 && S.conflicts.length === 0)) { followConflicts(); }
      if (!S.online) { probe(); }
    });
    window.addEventListener('pagehide', function () { es.close(); });
  }

  var following = false;

  // followConflicts reads the list's check-ins after the last one seen
  // and keeps those recorded with a conflict.
  function followConflicts() {
    if (following || !S.online) { return; }
    following = true;
    var step = function () {
      return call(api + '/checkin-lists/' + listID + '/checkins?limit=500&after=' + S.feedAfter, { method: 'GET' }, 15000)
        .then(function (res) {
          if (!res.ok) { return; }
          return res.json().then(function (page) {
            page.items.forEach(function (c) { if (c.conflict) { S.conflicts.unshift(c); } });
            S.conflicts = S.conflicts.slice(0, 50);
            S.feedAfter = page.next_after;
            if (page.items.length === 500) { return step(); }
          });
        });
    };
    step().catch(function () { /* read again at the next change */ }).then(function () {
      following = false;
      metaPut(mk('feed'), { after: S.feedAfter, conflicts: S.conflicts });
      renderAttention();
    });
  }

  // ---- Ready for offline use: the worker keeps the page, the keys and
  // the whole list are on the device.

  function checkReady() {
    var was = S.ready;
    S.ready = (S.worker === 'ready' || S.worker === 'unsupported') && S.keys.size > 0 && S.complete;
    if (S.ready && !was && !root.dataset.readyMs) { root.dataset.readyMs = performance.now().toFixed(0); }
    renderStatus();
  }

  function startWorker() {
    if (S.worker === 'unsupported') { return; }
    var controlled = !!navigator.serviceWorker.controller;
    navigator.serviceWorker.register(cfg.worker, { scope: cfg.scope }).then(function () {
      return navigator.serviceWorker.ready;
    }).then(function (reg) {
      var urls = [];
      document.querySelectorAll('script[src], link[rel="stylesheet"]').forEach(function (el) {
        var u = new URL(el.src || el.href, location.href);
        if (u.origin === location.origin) { urls.push(u.pathname); }
      });
      return new Promise(function (resolve, reject) {
        var ch = new MessageChannel();
        ch.port1.onmessage = function (e) { if (e.data && e.data.ok) { resolve(); } else { reject(new Error(e.data && e.data.error)); } };
        reg.active.postMessage({ type: 'keep', urls: urls, page: location.pathname, fetch: !controlled }, [ch.port2]);
      });
    }).then(function () {
      S.worker = 'ready';
      checkReady();
    }).catch(function (err) {
      S.worker = 'failed';
      if (window.console) { console.error('door worker', err); }
      renderStatus();
    });
  }

  // ---- Scanners.

  function typing(el) {
    if (!el) { return false; }
    if (el.isContentEditable || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') { return true; }
    return el.tagName === 'INPUT' && ['radio', 'checkbox', 'button', 'submit', 'reset'].indexOf(el.type) < 0;
  }

  // A keyboard-wedge scanner types the code and Enter, fast, wherever
  // the focus is: anywhere on the page but in a field, it is a scan.
  function wedge() {
    var buf = '', last = 0;
    document.addEventListener('keydown', function (e) {
      if (e.ctrlKey || e.altKey || e.metaKey || typing(document.activeElement)) { return; }
      var now = performance.now();
      if (now - last > WEDGE_GAP) { buf = ''; }
      last = now;
      if (e.key === 'Enter') {
        if (buf.length >= 4) {
          e.preventDefault();
          var code = buf;
          buf = '';
          scan(code);
        }
        buf = '';
        return;
      }
      if (e.key && e.key.length === 1 && e.key !== ' ') { buf += e.key; }
    }, true);
    $('scan').addEventListener('submit', function (e) {
      e.preventDefault();
      var code = $('code').value;
      $('code').value = '';
      scan(code);
    });
  }

  var camera = { stream: null, detector: null, seen: new Map(), sightings: 0, timer: null, canvas: null };

  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      if (window.jsQR) { resolve(); return; }
      var s = document.createElement('script');
      s.src = src;
      if (cfg.jsqr_integrity) { s.integrity = cfg.jsqr_integrity; }
      s.onload = resolve;
      s.onerror = function () { reject(new Error('could not load ' + src)); };
      document.head.appendChild(s);
    });
  }

  function cameraStatus(key) {
    $('camera-status').textContent = key ? t(key) : '';
    $('camera').dataset.state = key ? key.replace('camera.', '') : '';
  }

  function startCamera() {
    var btn = $('camera-toggle');
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) { cameraStatus('camera.unavailable'); return; }
    $('camera').hidden = false;
    navigator.mediaDevices.getUserMedia({ video: { facingMode: 'environment' }, audio: false }).then(function (st) {
      camera.stream = st;
      var video = $('camera-video');
      video.srcObject = st;
      return video.play();
    }).then(function () {
      if (!('BarcodeDetector' in window)) { return null; }
      return window.BarcodeDetector.getSupportedFormats().then(function (f) {
        return f.indexOf('qr_code') >= 0 ? new window.BarcodeDetector({ formats: ['qr_code'] }) : null;
      }, function () { return null; });
    }).then(function (detector) {
      camera.detector = detector;
      $('camera').dataset.decoder = detector ? 'barcode-detector' : 'jsqr';
      return detector ? null : loadScript(cfg.jsqr);
    }).then(function () {
      btn.setAttribute('aria-pressed', 'true');
      btn.textContent = t('camera.stop');
      cameraStatus('camera.looking');
      look();
    }).catch(function (err) {
      stopCamera();
      cameraStatus(err && err.name === 'NotAllowedError' ? 'camera.denied' : 'camera.unavailable');
    });
  }

  function stopCamera() {
    if (camera.timer) { clearTimeout(camera.timer); camera.timer = null; }
    if (camera.stream) { camera.stream.getTracks().forEach(function (tr) { tr.stop(); }); camera.stream = null; }
    var btn = $('camera-toggle');
    btn.setAttribute('aria-pressed', 'false');
    btn.textContent = t('camera.start');
    $('camera').hidden = true;
    cameraStatus('');
  }

  // look reads the camera's picture again and again; a code in view is
  // one scan however long it stays there.
  function look() {
    if (!camera.stream) { return; }
    var video = $('camera-video');
    var found = Promise.resolve([]);
    if (video.readyState >= 2 && video.videoWidth > 0) {
      if (camera.detector) {
        found = camera.detector.detect(video).then(function (bs) { return bs.map(function (b) { return b.rawValue; }); }, function () { return []; });
      } else if (window.jsQR) {
        var scale = Math.min(1, 800 / Math.max(video.videoWidth, video.videoHeight));
        var w = Math.round(video.videoWidth * scale), h = Math.round(video.videoHeight * scale);
        camera.canvas = camera.canvas || document.createElement('canvas');
        camera.canvas.width = w;
        camera.canvas.height = h;
        var ctx = camera.canvas.getContext('2d', { willReadFrequently: true });
        ctx.drawImage(video, 0, 0, w, h);
        found = new Promise(function (resolve) {
          var qr = window.jsQR(ctx.getImageData(0, 0, w, h).data, w, h, { inversionAttempts: 'dontInvert' });
          resolve(qr && qr.data ? [qr.data] : []);
        });
      }
    }
    found.then(function (codes) { codes.forEach(sighted); }, function () { /* nothing read */ }).then(function () {
      if (camera.stream) { camera.timer = setTimeout(look, CAMERA_EVERY); }
    });
  }

  function sighted(code) {
    var now = Date.now();
    var last = camera.seen.get(code);
    camera.seen.set(code, now);
    camera.sightings++;
    $('camera').dataset.sightings = String(camera.sightings);
    camera.seen.forEach(function (at, c) { if (now - at > 60000) { camera.seen.delete(c); } });
    if (last && now - last < CAMERA_SAME) { return; }
    scan(code);
  }

  // ---- Finding a registration by user id, walk-ins, the device.

  function search(e) {
    e.preventDefault();
    var q = $('search-user').value.trim();
    var out = $('search-results');
    out.textContent = '';
    $('search-status').textContent = '';
    if (!q) { return; }
    var mine = tx(['tickets'], 'readonly', function (tickets) {
      return req(tickets.index('user').getAll(IDBKeyRange.bound([listID, q], [listID, q + '\uffff']), 20));
    }).catch(function () { return []; });
    var theirs = S.online ? call(cfg.search + '?user=' + encodeURIComponent(q), { method: 'GET' }, 8000).then(function (res) {
      return res.ok ? res.json().then(function (j) { return j.items; }) : [];
    }).catch(function () { return []; }) : Promise.resolve([]);
    Promise.all([mine, theirs]).then(function (got) {
      var byID = new Map();
      got[0].forEach(function (r) { byID.set(r.registration_id, r); });
      got[1].forEach(function (r) { byID.set(r.registration_id, Object.assign({}, byID.get(r.registration_id) || {}, r)); });
      var found = Array.from(byID.values());
      $('search-status').textContent = found.length ? t('search.found', found.length) : t('search.none');
      found.forEach(function (r) {
        var li = document.createElement('li');
        var p = document.createElement('p');
        var state = r.valid ? (r.inside ? t('search.inside') : t('search.valid')) : t('search.invalid');
        p.textContent = t('who', r.user_id, r.seats || 1) + ' · ' + state + ' · ' + r.registration_id;
        li.appendChild(p);
        var b = document.createElement('button');
        b.type = 'button';
        b.className = 'door-big';
        b.dataset.registration = r.registration_id;
        b.textContent = S.mode === 'exit' ? t('search.checkout') : t('search.checkin');
        b.addEventListener('click', function () { scan(r.registration_id); });
        li.appendChild(b);
        out.appendChild(li);
      });
    });
  }

  function walkIn(e) {
    e.preventDefault();
    var err = $('walkin-error');
    var user = $('walkin-user');
    var fail = function (msg) {
      err.textContent = msg;
      err.hidden = false;
      user.setAttribute('aria-invalid', 'true');
    };
    err.hidden = true;
    user.removeAttribute('aria-invalid');
    if (!S.online) { fail(t('walkin.offline')); return; }
    var body = { activity_id: $('walkin-activity').value, user_id: user.value.trim(), seats: parseInt($('walkin-seats').value, 10) || 1, device: S.device };
    var t0 = performance.now();
    call(api + '/checkin-lists/' + listID + '/walk-ins', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': crypto.randomUUID() },
      body: JSON.stringify(body)
    }, 10000).then(function (res) {
      return res.json().then(function (j) {
        if (res.ok) {
          user.value = '';
          var r = { outcome: j.result, user: j.registration.user_id, seats: j.registration.seats, ms: performance.now() - t0 };
          show(r);
          return;
        }
        var e2 = j.error || {};
        if (res.status === 400) { fail(e2.message || ''); return; }
        show({ outcome: 'refused', reason: e2.code, message: e2.message, inside: e2.inside, max: e2.max_inside, user: body.user_id, seats: body.seats });
      });
    }, function () { fail(t('walkin.offline')); });
  }

  function randomDevice() {
    var a = new Uint8Array(3);
    crypto.getRandomValues(a);
    return 'door-' + Array.from(a, function (b) { return b.toString(16).padStart(2, '0'); }).join('');
  }

  function settings() {
    S.device = localStorage.getItem('capacityd-door-device') || '';
    if (!S.device) {
      S.device = randomDevice();
      localStorage.setItem('capacityd-door-device', S.device);
    }
    S.sound = localStorage.getItem('capacityd-door-sound') !== 'off';
    $('device-name').value = S.device;
    $('sound').checked = S.sound;
    $('scan-device').value = S.device;
    $('device-shown').textContent = S.device;
    $('device-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var v = $('device-name').value.trim();
      var err = $('device-error');
      // As the service checks it: 1 to 64 printable characters.
      var n = Array.from(v).length;
      if (n < 1 || n > 64 || !/^[\p{L}\p{M}\p{N}\p{P}\p{S} ]+$/u.test(v)) {
        err.hidden = false;
        $('device-name').setAttribute('aria-invalid', 'true');
        return;
      }
      err.hidden = true;
      $('device-name').removeAttribute('aria-invalid');
      S.device = v;
      S.sound = $('sound').checked;
      localStorage.setItem('capacityd-door-device', v);
      localStorage.setItem('capacityd-door-sound', S.sound ? 'on' : 'off');
      $('scan-device').value = v;
      $('device-shown').textContent = v;
      $('device-saved').hidden = false;
    });
    var mode = localStorage.getItem('capacityd-door-mode');
    if (mode === 'exit' || mode === 'entry') {
      S.mode = mode;
      $('type-' + mode).checked = true;
    }
    document.querySelectorAll('input[name="type"]').forEach(function (r) {
      r.addEventListener('change', function () {
        if (r.checked) {
          S.mode = r.value;
          root.dataset.mode = r.value;
          localStorage.setItem('capacityd-door-mode', r.value);
        }
      });
    });
    root.dataset.mode = S.mode;
  }

  // forget removes this device's copy of the list (its registrations, the
  // list's rules and counts, the sync's cursor, the scans already sent or
  // refused) and leaves the page. Scans not yet sent are never removed:
  // the same transaction counts them, and any keeps everything.
  function forget(e) {
    e.preventDefault();
    var status = $('forget-status');
    var waiting = 0;
    S.forgotten = true;
    tx(['meta', 'tickets', 'scans'], 'readwrite', function (meta, tickets, scans) {
      var q = scans.index('state').count(IDBKeyRange.bound([listID, 'queued', 0], [listID, 'queued', Infinity]));
      q.onsuccess = function () {
        waiting = q.result;
        if (waiting > 0) { return; }
        tickets.delete(IDBKeyRange.bound([listID, ''], [listID, '\uffff']));
        ['sync', 'list', 'counts', 'feed'].forEach(function (k) { meta.delete(mk(k)); });
        var c = scans.index('state').openCursor(IDBKeyRange.bound([listID], [listID, []]));
        c.onsuccess = function () {
          var cur = c.result;
          if (cur) { cur.delete(); cur.continue(); }
        };
      };
    }).then(function () {
      if (waiting > 0) {
        S.forgotten = false;
        status.textContent = t('forget.waiting', waiting);
        return;
      }
      root.dataset.forgotten = '1';
      window.location.assign(cfg.home);
    }, function (err) {
      S.forgotten = false;
      status.textContent = t('forget.failed', err && err.message ? err.message : String(err));
    });
  }

  // ---- Start: what the device kept, then the network.

  function restore() {
    return Promise.all([metaGet('keys'), metaGet(mk('sync')), metaGet(mk('list')), metaGet(mk('counts')), metaGet(mk('feed')), countQueued(),
      tx(['tickets'], 'readonly', function (tickets) { return req(tickets.count(IDBKeyRange.bound([listID, ''], [listID, '\uffff']))); }),
      tx(['scans'], 'readonly', function (scans) { return req(scans.index('state').getAll(IDBKeyRange.bound([listID, 'failed', 0], [listID, 'failed', Infinity]))); })
    ]).then(function (got) {
      var keys = got[0], sync = got[1], list = got[2], counts = got[3], feed = got[4];
      if (sync) { S.cursor = sync.cursor; S.complete = sync.complete; S.syncStart = sync.syncStart || 0; }
      if (list && list.at > cfg.rendered_at) { S.list = list.list; }
      if (counts && counts.at > cfg.rendered_at) { S.counts = counts.counts; }
      if (feed) { S.feedAfter = feed.after || 0; S.conflicts = feed.conflicts || []; }
      S.tickets = got[6];
      S.failed = got[7].map(function (s) { return { user: s.user, reg: s.reg, at: s.at, message: s.message }; });
      return keys ? importKeys(keys) : null;
    });
  }

  function start() {
    root.classList.add('door-live');
    document.querySelectorAll('[data-door-js]').forEach(function (el) { el.hidden = false; });
    document.querySelectorAll('[data-door-nojs]').forEach(function (el) { el.hidden = true; });
    settings();
    renderCounts();
    renderStatus();
    wedge();
    $('camera-toggle').addEventListener('click', function () { if (camera.stream) { stopCamera(); } else { startCamera(); } });
    $('search').addEventListener('submit', search);
    $('walkin').addEventListener('submit', walkIn);
    $('forget').addEventListener('submit', forget);
    window.addEventListener('online', probe);
    window.addEventListener('offline', goOffline);
    restore().catch(function (err) {
      if (window.console) { console.error('door restore', err); }
    }).then(function () {
      renderCounts();
      checkReady();
      startWorker();
      stream();
      if (!S.online) { goOffline(); }
      // Uploads stopped by a failing service are tried again.
      setInterval(function () { if (S.online && S.queued > 0 && !S.uploading) { flush(); } }, RETRY_EVERY);
      refresh().then(function () {
        checkReady();
        kickSync();
        flush();
        if (S.counts.conflicts > 0) { followConflicts(); }
      });
    });
  }

  start();
}());
