/*
 * capacityd seat widget. Include this script once, from the service:
 *   <script src="https://SERVICE/widget/seats.js" async></script>
 * and every element
 *   <div data-seats-activity="ACTIVITY_ID"></div>
 * shows "N of M seats left", "Full", or "Full · N waiting" when the
 * activity has a waiting list ("N of M seats left · K waiting" when seats
 * are free that the parties in line do not fit), updated live from the
 * service's seat stream.
 * Text is in English, Traditional Chinese (zh-TW) or Simplified Chinese
 * (zh-CN): the element's data-lang, else the nearest lang (the element's or
 * the page's), else the browser's language; the element's lang becomes the
 * language of its text. Widgets of the same activity
 * share one stream; a broken stream is reopened with exponential backoff.
 * No dependencies. window.capacitydSeats.scan() binds elements added after
 * the page loaded.
 *
 * The script brings a small default look (one <style> element, added once,
 * whose rules only match the class capacityd-seats it gives its elements),
 * themed with the custom properties --capacityd-*; data-style="none" on the
 * script tag leaves it out. The visitor is never shown a configuration
 * mistake: an activity that does not exist shows a dash (—), and the reason
 * goes to the console. docs/widgets.md describes the look, its custom
 * properties and hooks, and every state.
 */
(function () {
  'use strict';
  if (window.capacitydSeats) { return; }

  var script = document.currentScript;
  var base = script && script.src ? new URL(script.src, location.href).origin : location.origin;
  var MAX_BACKOFF_MS = 30000;
  var streams = {}; // activity id -> stream state

  var TEXT = {
    en: {
      left: function (r, c) { return r + ' of ' + c + ' seats left'; },
      leftWaiting: function (n) { return ' \u00b7 ' + n + ' waiting'; },
      full: 'Full',
      waiting: function (n) { return 'Full \u00b7 ' + n + ' waiting'; },
      loading: 'Loading seats\u2026'
    },
    'zh-TW': {
      left: function (r, c) { return '剩餘 ' + r + ' / ' + c + ' 個名額'; },
      leftWaiting: function (n) { return ' \u00b7 候補 ' + n + ' 人'; },
      full: '已額滿',
      waiting: function (n) { return '已額滿 \u00b7 候補 ' + n + ' 人'; },
      loading: '名額載入中\u2026'
    },
    'zh-CN': {
      left: function (r, c) { return '剩余 ' + r + ' / ' + c + ' 个名额'; },
      leftWaiting: function (n) { return ' \u00b7 ' + n + ' 人候补'; },
      full: '已满',
      waiting: function (n) { return '已满 \u00b7 ' + n + ' 人候补'; },
      loading: '正在加载名额\u2026'
    }
  };

  // NONE is shown where there are no numbers to show, and will be none.
  var NONE = '\u2014';

  // @include style.js

  // STYLE is the default look. Its rules match the class capacityd-seats
  // only; every colour, the font, the size and the corners come from a
  // custom property, with the default after its name. Text in zh-TW takes
  // FONT_TC: a rule of the same weight (:where adds none), after the first.
  var STYLE = [
    '.capacityd-seats {',
    '  box-sizing: border-box; width: fit-content; max-width: 100%;',
    '  padding: .2em .65em; border-radius: var(--capacityd-radius, .5em);',
    '  font-family: var(--capacityd-font, ' + FONT + ');',
    '  font-size: var(--capacityd-seats-font-size, var(--capacityd-font-size, 1rem));',
    '  font-weight: 700; line-height: 1.5; font-variant-numeric: tabular-nums;',
    '  color: var(--capacityd-seats-color, #0b6e4f);',
    '  background: var(--capacityd-seats-background, #e3f4ec);',
    '  transition: opacity .2s;',
    '}',
    '.capacityd-seats:where(:lang(zh-TW)) { font-family: var(--capacityd-font, ' + FONT_TC + '); }',
    '.capacityd-seats.seats-full {',
    '  color: var(--capacityd-full-color, #b42318);',
    '  background: var(--capacityd-full-background, #fdeceb);',
    '}',
    '.capacityd-seats:not([data-seats-remaining]) {',
    '  font-weight: 400;',
    '  color: var(--capacityd-muted-color, #5b6475);',
    '  background: var(--capacityd-muted-background, #f0f2f5);',
    '}',
    '.capacityd-seats[data-seats-state="reconnecting"] { opacity: .6; }'
  ].join('\n');

  // @include lang.js

  function seatsText(s, t) {
    if (s.remaining > 0) {
      return t.left(s.remaining, s.capacity) + (s.waiting > 0 ? t.leftWaiting(s.waiting) : '');
    }
    return s.waiting > 0 ? t.waiting(s.waiting) : t.full;
  }

  function setText(el, text) {
    if (el.textContent !== text) { el.textContent = text; }
  }

  function render(st) {
    var s = st.seats;
    st.els.forEach(function (el) {
      el.setAttribute('data-seats-state', st.state);
      if (!s) { return; }
      setText(el, seatsText(s, TEXT[el.capacitydLang]));
      el.setAttribute('data-seats-remaining', String(s.remaining));
      el.classList.toggle('seats-full', s.remaining <= 0);
    });
  }

  function setState(st, state) {
    st.state = state;
    render(st);
  }

  function path(st, suffix) {
    return base + '/v1/activities/' + encodeURIComponent(st.id) + '/seats' + suffix;
  }

  function connect(st) {
    st.timer = null;
    var es = new EventSource(path(st, '/stream'));
    st.es = es;
    es.addEventListener('seats', function (e) {
      var s;
      try { s = JSON.parse(e.data); } catch (err) { return; }
      st.attempt = 0;
      st.seats = s;
      setState(st, 'live');
    });
    es.onerror = function () {
      // Reconnect on our own schedule rather than EventSource's fixed one.
      es.close();
      if (st.es !== es) { return; }
      st.es = null;
      setState(st, 'reconnecting');
      retry(st);
    };
  }

  function retry(st) {
    var delay = Math.min(MAX_BACKOFF_MS, 1000 * Math.pow(2, st.attempt));
    st.attempt = Math.min(st.attempt + 1, 6);
    delay = delay / 2 + Math.random() * delay / 2;
    // Meanwhile read the numbers once, and stop for an activity that does
    // not exist.
    fetch(path(st, ''), { cache: 'no-store' }).then(function (r) {
      if (r.status === 404) { return 'missing'; }
      return r.ok ? r.json() : null;
    }).catch(function () { return null; }).then(function (s) {
      if (s === 'missing') {
        console.error('capacityd seats: there is no activity "' + st.id + '" at ' + base +
          ' (its seats answer 404): check the data-seats-activity attribute of the element.');
        st.seats = null;
        st.els.forEach(function (el) {
          setText(el, NONE);
          el.removeAttribute('data-seats-remaining');
          el.classList.remove('seats-full');
        });
        setState(st, 'missing');
        return;
      }
      if (s) { st.seats = s; render(st); }
      st.timer = setTimeout(function () { connect(st); }, delay);
    });
  }

  function bind(el) {
    var id = el.getAttribute('data-seats-activity');
    if (!id || el.hasAttribute('data-seats-state')) { return; }
    el.capacitydLang = langOf(el);
    el.setAttribute('lang', el.capacitydLang);
    el.classList.add('capacityd-seats');
    el.setAttribute('aria-live', 'polite');
    el.setAttribute('aria-atomic', 'true');
    if (!el.hasAttribute('role')) { el.setAttribute('role', 'status'); }
    var st = streams[id];
    if (!st) {
      st = streams[id] = { id: id, els: [], seats: null, state: 'connecting', attempt: 0, es: null, timer: null };
      connect(st);
    }
    st.els.push(el);
    if (st.state === 'missing') {
      el.textContent = NONE;
    } else if (!st.seats && !el.textContent) {
      el.textContent = TEXT[el.capacitydLang].loading;
    }
    render(st);
  }

  function scan(root) {
    var els = (root || document).querySelectorAll('[data-seats-activity]');
    Array.prototype.forEach.call(els, bind);
  }

  window.capacitydSeats = { scan: scan };
  addStyle('seats', 'seats');
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', function () { scan(); });
  } else {
    scan();
  }
}());
