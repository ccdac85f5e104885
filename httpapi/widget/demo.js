/* The demo page's own behaviour: the activities' titles and their "sign up a random user" buttons. */
(function () {
  'use strict';
  document.querySelectorAll('[data-demo-title]').forEach(function (title) {
    var id = title.getAttribute('data-demo-title');
    fetch('/v1/activities/' + encodeURIComponent(id), { cache: 'no-store' }).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (a) {
      if (a && a.title) { title.textContent = a.title; }
    }).catch(function () {});
  });

  document.querySelectorAll('[data-demo-signup]').forEach(function (button) {
    var id = button.getAttribute('data-demo-signup');
    var result = document.querySelector('[data-demo-signup-result="' + id + '"]');
    if (!result) { return; }
    button.addEventListener('click', function () {
      if (button.disabled) { return; }
      button.disabled = true;
      fetch('/demo/signups', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ activity_id: id })
      }).then(function (r) {
        return r.json().then(function (body) { return { ok: r.ok, body: body }; });
      }).then(function (res) {
        if (res.ok && res.body.status === 'waitlisted') {
          result.textContent = 'No seat free: ' + res.body.user_id + ' joined the waiting list at place ' +
            res.body.waitlist_position + '.';
        } else if (res.ok) {
          result.textContent = 'Signed up ' + res.body.user_id + '.';
        } else if (res.body.error && res.body.error.code === 'activity_full') {
          result.textContent = 'No seat left: the activity is full.';
        } else {
          result.textContent = 'Signup failed: ' + (res.body.error ? res.body.error.message : 'unknown error');
        }
      }).catch(function () {
        result.textContent = 'Signup failed: the server could not be reached.';
      }).then(function () { button.disabled = false; });
    });
  });
}());
