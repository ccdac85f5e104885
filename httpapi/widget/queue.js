/*
 * capacityd admission-queue widget. Include this script once, from the
 * service:
 *   <script src="https://SERVICE/widget/queue.js" async></script>
 * and give it the signed-in user's token, either on the element
 *   <div data-queue-activity="ACTIVITY_ID" data-queue-token="USER_TOKEN"></div>
 * or from the host page's script, once the widget's script has loaded:
 *   capacitydQueue.start(element, {activity: 'ACTIVITY_ID', token: 'USER_TOKEN',
 *     onAdmitted: function (admissionToken, ticket) { ... }});
 * The widget joins the activity's admission queue, shows "You are number N
 * in line · about M min", asks again as often as the service says, and
 * when the user is admitted hands the admission token to onAdmitted and
 * dispatches a "capacityd-admitted" event on the element (detail:
 * {admissionToken, tokenExpiresAt, ticket}); the host page then signs up
 * with the token in the Admission-Token header.
 * Text is in English, Traditional Chinese (zh-TW) or Simplified Chinese
 * (zh-CN): the element's data-lang, else the nearest lang (the element's or
 * the page's), else the browser's language; the element's lang becomes the
 * language of its text. The element gets the class
 * capacityd-queue and data-queue-state (waiting, admitted, used, expired,
 * sold_out); the look is the host page's. No dependencies. A failed request
 * is retried with exponential backoff; a refusal (no such activity, no
 * queue, a bad token) shows a dash (—) and goes to the console.
 */
(function () {
  'use strict';
  if (window.capacitydQueue) { return; }

  var script = document.currentScript;
  var base = script && script.src ? new URL(script.src, location.href).origin : location.origin;
  var MAX_BACKOFF_MS = 30000;
  var NONE = '\u2014';

  var TEXT = {
    en: {
      joining: 'Joining the line\u2026',
      drawn: 'You are in line. Places are drawn at random when registration opens.',
      number: function (n) { return 'You are number ' + n + ' in line'; },
      minutes: function (m) { return m <= 1 ? ' \u00b7 about a minute' : ' \u00b7 about ' + m + ' min'; },
      turn: 'It\u2019s your turn: sign up now',
      used: 'You are signed up',
      expired: 'Your place in line has lapsed',
      soldOut: 'Sold out'
    },
    'zh-TW': {
      joining: '正在加入排隊\u2026',
      drawn: '您已加入排隊，開放報名時將隨機決定順位。',
      number: function (n) { return '您的順位：第 ' + n + ' 位'; },
      minutes: function (m) { return ' \u00b7 預計等候約 ' + Math.max(m, 1) + ' 分鐘'; },
      turn: '輪到您了，請立即報名',
      used: '您已完成報名',
      expired: '您的排隊順位已失效',
      soldOut: '已額滿'
    },
    'zh-CN': {
      joining: '正在排队\u2026',
      drawn: '您已在队列中，开放报名时将随机排序。',
      number: function (n) { return '您排在第 ' + n + ' 位'; },
      minutes: function (m) { return m <= 1 ? ' \u00b7 约 1 分钟' : ' \u00b7 约 ' + m + ' 分钟'; },
      turn: '轮到您了，请立即报名',
      used: '您已报名',
      expired: '您的排队资格已失效',
      soldOut: '已售罄'
    }
  };

  // @include lang.js

  // textOf is what the element says of a ticket.
  function textOf(t, ticket) {
    switch (ticket.state) {
      case 'waiting':
        if (ticket.position === null) { return t.drawn; }
        var s = t.number(ticket.position);
        if (ticket.estimated_wait_seconds !== null) { s += t.minutes(Math.ceil(ticket.estimated_wait_seconds / 60)); }
        return s;
      case 'admitted': return t.turn;
      case 'used': return t.used;
      case 'expired': return t.expired;
      case 'sold_out': return t.soldOut;
    }
    return NONE;
  }

  function call(method, path, token) {
    return fetch(base + path, {method: method, headers: {'Authorization': 'Bearer ' + token}, mode: 'cors'})
      .then(function (resp) {
        return resp.json().then(function (body) { return {status: resp.status, body: body}; },
          function () { return {status: resp.status, body: null}; });
      });
  }

  // start binds el to the activity's queue for the user of opts.token.
  function start(el, opts) {
    opts = opts || {};
    if (el.capacitydQueue) { return el.capacitydQueue; }
    var activity = opts.activity || el.getAttribute('data-queue-activity');
    var token = opts.token || el.getAttribute('data-queue-token');
    var code = langOf(el);
    var t = TEXT[code];
    el.setAttribute('lang', code);
    var state = {stopped: false, admitted: false, backoff: 1000, timer: null};
    el.capacitydQueue = state;
    el.classList.add('capacityd-queue');
    el.textContent = t.joining;
    if (!activity || !token) {
      el.textContent = NONE;
      console.error('capacityd queue widget: data-queue-activity and a user token are required');
      return state;
    }
    var path = '/v1/activities/' + encodeURIComponent(activity) + '/queue';

    function schedule(ms) {
      if (!state.stopped) { state.timer = setTimeout(poll, ms); }
    }
    function show(ticket) {
      el.setAttribute('data-queue-state', ticket.state);
      el.textContent = textOf(t, ticket);
      if (ticket.state === 'admitted' && !state.admitted) {
        state.admitted = true;
        if (typeof opts.onAdmitted === 'function') { opts.onAdmitted(ticket.admission_token, ticket); }
        el.dispatchEvent(new CustomEvent('capacityd-admitted', {bubbles: true,
          detail: {admissionToken: ticket.admission_token, tokenExpiresAt: ticket.token_expires_at, ticket: ticket}}));
      }
    }
    function answer(r) {
      if (r.status === 200 && r.body) {
        state.backoff = 1000;
        show(r.body);
        var done = r.body.state === 'used' || r.body.state === 'expired' || r.body.state === 'sold_out';
        if (!done) { schedule(Math.max(250, r.body.poll_after_ms)); }
        return;
      }
      if (r.status === 429 || r.status >= 500) { return retry(); }
      el.textContent = NONE;
      el.removeAttribute('data-queue-state');
      console.error('capacityd queue widget: activity ' + activity + ': ' + r.status + ' ' +
        (r.body && r.body.error ? r.body.error.code + ': ' + r.body.error.message : ''));
    }
    function retry() {
      schedule(state.backoff);
      state.backoff = Math.min(MAX_BACKOFF_MS, state.backoff * 2);
    }
    function poll() { call('GET', path + '/me', token).then(answer, retry); }
    state.stop = function () { state.stopped = true; clearTimeout(state.timer); };
    // Joining twice gives the same place: a failed join is tried again.
    function join() {
      call('POST', path, token).then(answer, function () {
        if (state.stopped) { return; }
        state.timer = setTimeout(join, state.backoff);
        state.backoff = Math.min(MAX_BACKOFF_MS, state.backoff * 2);
      });
    }
    join();
    return state;
  }

  function scan() {
    var els = document.querySelectorAll('[data-queue-activity][data-queue-token]');
    for (var i = 0; i < els.length; i++) { start(els[i]); }
  }

  window.capacitydQueue = {start: start, scan: scan};
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', scan);
  } else {
    scan();
  }
})();
