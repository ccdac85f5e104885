/*
 * The demo page's own behaviour: the activities' titles (in their cards and in a pool's line, one read per
 * activity) and their "sign up a random user" buttons, which sign up a party of the size the card's picker
 * shows, if it has one (else one seat).
 */
(function () {
  'use strict';
  var titles = {}; // activity id -> the elements showing its title
  document.querySelectorAll('[data-demo-title]').forEach(function (title) {
    var id = title.getAttribute('data-demo-title');
    (titles[id] = titles[id] || []).push(title);
  });
  Object.keys(titles).forEach(function (id) {
    fetch('/v1/activities/' + encodeURIComponent(id), { cache: 'no-store' }).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (a) {
      if (!a || !a.title) { return; }
      titles[id].forEach(function (title) { title.textContent = a.title; });
    }).catch(function () {});
  });

  function seatsWord(n) { return n === 1 ? '1 seat' : n + ' seats'; }

  // answer says what the service answered a signup for seats.
  function answer(res, seats) {
    var b = res.body;
    if (res.ok && b.status === 'waitlisted') {
      return 'No room for ' + seatsWord(b.seats) + ': ' + b.user_id + ' joined the waiting list at place ' +
        b.waitlist_position + '.';
    }
    if (res.ok) { return 'Signed up ' + b.user_id + ' for ' + seatsWord(b.seats) + '.'; }
    var e = b.error || {};
    if (e.code === 'activity_full') {
      return typeof e.remaining === 'number' && e.remaining > 0 ?
        'No room for ' + seatsWord(seats) + ': only ' + seatsWord(e.remaining) + ' left.' :
        'No seat left: the activity is full.';
    }
    return 'Signup failed: ' + (e.message || 'unknown error');
  }

  document.querySelectorAll('[data-demo-signup]').forEach(function (button) {
    var id = button.getAttribute('data-demo-signup');
    // The card's own result line and picker: an activity may be shown twice (on its own and in a pool).
    var card = button.closest('.pooled, .card') || document;
    var result = card.querySelector('[data-demo-signup-result="' + id + '"]');
    var picker = card.querySelector('[data-demo-seats="' + id + '"]');
    if (!result) { return; }
    button.addEventListener('click', function () {
      if (button.disabled) { return; }
      button.disabled = true;
      var seats = picker ? parseInt(picker.value, 10) : 1;
      fetch('/demo/signups', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ activity_id: id, seats: seats })
      }).then(function (r) {
        return r.json().then(function (body) { return { ok: r.ok, body: body }; });
      }).then(function (res) {
        result.textContent = answer(res, seats);
      }).catch(function () {
        result.textContent = 'Signup failed: the server could not be reached.';
      }).then(function () { button.disabled = false; });
    });
  });
}());
