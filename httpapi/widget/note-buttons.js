/*
 * capacityd note buttons. Include this script once, from the service:
 *   <script src="https://SERVICE/widget/note-buttons.js" async></script>
 * and every element
 *   <div data-note="NOTE_ID"></div>
 * records one view of the note per page load and shows its views and
 * waters, with a "Water" button that records a water and shows the numbers
 * the server answers with. A click while a water is in flight does nothing.
 *
 * Views and waters are writes: the service accepts them from a page of
 * any site, unless its CORS_ALLOWED_ORIGINS setting lists sites and not
 * this one. Then the buttons still show the numbers and say that this site
 * is not allowed to record them.
 *
 * Text is in English or Simplified Chinese: the element's data-lang, else
 * the page's lang, else the browser's language. No dependencies.
 * window.capacitydNotes.scan() binds elements added later.
 */
(function () {
  'use strict';
  if (window.capacitydNotes) { return; }

  var script = document.currentScript;
  var base = script && script.src ? new URL(script.src, location.href).origin : location.origin;
  var ID = /^[A-Za-z0-9_-]{1,128}$/;
  var notes = {}; // note id -> state shared by the elements of that note

  var TEXT = {
    en: {
      views: function (n) { return n + (n === 1 ? ' view' : ' views'); },
      waters: function (n) { return n + (n === 1 ? ' water' : ' waters'); },
      pending: '\u2026',
      water: 'Water',
      unreachable: 'Could not reach the server',
      failed: 'Could not record it; try again later',
      unknown: 'This note is not registered with the service',
      limited: 'Too soon to water again; try again later',
      refused: function (origin) { return 'This site (' + origin + ') is not allowed to record views and waters'; }
    },
    zh: {
      views: function (n) { return n + ' 次浏览'; },
      waters: function (n) { return n + ' 次浇水'; },
      pending: '\u2026',
      water: '浇水',
      unreachable: '无法连接服务器',
      failed: '记录失败，请稍后再试',
      unknown: '此笔记未在服务中登记',
      limited: '浇水太频繁，请稍后再试',
      refused: function (origin) { return '此网站（' + origin + '）未获准记录浏览和浇水'; }
    }
  };

  // lang picks the text of an element: its data-lang, else the nearest
  // lang (the page's), else the browser's language. Any Chinese is
  // Simplified Chinese; anything else is English.
  function lang(el) {
    var l = el.getAttribute('data-lang');
    if (!l) {
      var holder = el.closest('[lang]');
      l = holder ? holder.getAttribute('lang') : '';
    }
    if (!l) { l = (navigator.languages && navigator.languages[0]) || navigator.language || ''; }
    var code = l.toLowerCase().split('-')[0];
    return TEXT[code] ? code : 'en';
  }

  function url(id, what) {
    return base + '/v1/notes/' + encodeURIComponent(id) + '/' + what;
  }

  // call resolves with the JSON answer, or rejects with {status, code} for
  // an error answer and {network: true} when no answer could be read.
  function call(id, method, what) {
    return fetch(url(id, what), { method: method, cache: 'no-store' }).then(function (r) {
      if (r.ok) { return r.json(); }
      return r.json().catch(function () { return {}; }).then(function (body) {
        throw { status: r.status, code: body && body.error && body.error.code };
      });
    }, function () {
      throw { network: true };
    });
  }

  function render(st) {
    st.parts.forEach(function (p) {
      var t = p.text;
      if (st.stats) {
        p.views.textContent = t.views(st.stats.views);
        p.waters.textContent = t.waters(st.stats.waters);
        p.root.setAttribute('data-note-views', String(st.stats.views));
        p.root.setAttribute('data-note-waters', String(st.stats.waters));
      }
      var msg = '';
      if (st.error === 'refused') {
        msg = t.refused(location.origin);
      } else if (st.error) {
        msg = t[st.error];
      }
      p.status.textContent = msg;
      p.root.setAttribute('data-note-state', st.error || 'ok');
      p.button.disabled = st.inflight || st.error === 'refused';
      p.button.setAttribute('aria-busy', st.inflight ? 'true' : 'false');
    });
  }

  // record posts a view or a water and shows the answer, or why there is
  // none.
  function record(st, what) {
    return call(st.id, 'POST', what).then(function (stats) {
      st.stats = stats;
      st.error = null;
    }, function (err) {
      return explain(st, err, what);
    }).then(function () { render(st); });
  }

  // explain sets st.error for a write that failed, and shows the numbers
  // when they can be read. From another site, a write the service refuses
  // for its origin cannot be told from an unreachable server by the write
  // alone (the refusal carries no CORS headers); a read, which every site
  // may make, tells them apart.
  // A 404 is a note the service does not count (its registered notes
  // mode), a 429 on a water one too soon after the last from this address.
  function explain(st, err, what) {
    return call(st.id, 'GET', 'stats').then(function (stats) {
      st.stats = stats;
      st.error = err.status === 403 || err.network ? 'refused' : refusal(err, what);
    }, function () {
      st.error = err.status === 403 ? 'refused' : (err.network ? 'unreachable' : refusal(err, what));
    });
  }

  function refusal(err, what) {
    if (err.status === 404) { return 'unknown'; }
    if (err.status === 429 && what === 'waters') { return 'limited'; }
    return 'failed';
  }

  function water(st) {
    if (st.inflight || st.error === 'refused') { return; }
    st.inflight = true;
    render(st);
    record(st, 'waters').then(function () {
      st.inflight = false;
      render(st);
    });
  }

  function span(cls, text) {
    var s = document.createElement('span');
    s.className = cls;
    s.textContent = text;
    return s;
  }

  function bind(el) {
    var id = el.getAttribute('data-note');
    if (!id || !ID.test(id) || el.hasAttribute('data-note-bound')) { return; }
    el.setAttribute('data-note-bound', '');
    var st = notes[id];
    var first = !st;
    if (first) {
      st = notes[id] = { id: id, parts: [], stats: null, inflight: false, error: null };
    }
    var t = TEXT[lang(el)];
    var p = {
      root: el,
      text: t,
      views: span('note-views', t.pending),
      waters: span('note-waters', t.pending),
      button: document.createElement('button'),
      status: span('note-status', '')
    };
    p.button.type = 'button';
    p.button.className = 'note-water';
    p.button.textContent = t.water;
    p.button.addEventListener('click', function () { water(st); });
    var counts = span('note-counts', '');
    counts.setAttribute('aria-live', 'polite');
    counts.appendChild(p.views);
    counts.appendChild(document.createTextNode(' \u00b7 '));
    counts.appendChild(p.waters);
    p.status.setAttribute('role', 'status');
    el.textContent = '';
    el.appendChild(counts);
    el.appendChild(document.createTextNode(' '));
    el.appendChild(p.button);
    el.appendChild(document.createTextNode(' '));
    el.appendChild(p.status);
    st.parts.push(p);
    render(st);
    if (first) {
      record(st, 'views'); // one view per note per page load
    }
  }

  function scan(root) {
    var els = (root || document).querySelectorAll('[data-note]');
    Array.prototype.forEach.call(els, bind);
  }

  window.capacitydNotes = { scan: scan };
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', function () { scan(); });
  } else {
    scan();
  }
}());
