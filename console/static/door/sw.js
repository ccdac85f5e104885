// The door's service worker (served at /console/doors/sw.js, scope
// /console/doors/): it keeps the door pages and the files they load, so
// that a door page opens and works without the network. The API's
// requests (/console/api/) are never answered from here: door.js decides
// what to do when they fail.
'use strict';

// Put in by the server: a hash of the console's static files (a new build
// is a new worker, whose install drops the old files), and the door's own
// files.
const VERSION = "__DOOR_VERSION__";
const ASSETS = ["__DOOR_ASSETS__"];

const ASSET_CACHE = 'capacityd-door-assets-' + VERSION;
// The pages are kept across versions: a device that updated its worker
// still opens its door offline.
const PAGE_CACHE = 'capacityd-door-pages';
const PAGE = /^\/console\/doors\/[^/]+$/;
const STATIC = '/console/static/';
// How long a page waits for the network before the kept copy is shown.
const PAGE_TIMEOUT_MS = 5000;

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(ASSET_CACHE).then((c) => c.addAll(ASSETS)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys
      .filter((k) => k.startsWith('capacityd-door-assets-') && k !== ASSET_CACHE)
      .map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET') { return; }
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) { return; }
  if (req.mode === 'navigate' && PAGE.test(url.pathname)) {
    event.respondWith(pageFirst(req, url.pathname));
  } else if (url.pathname.startsWith(STATIC)) {
    event.respondWith(assetFirst(req, url.pathname));
  }
});

// pageFirst answers a door page from the network, keeping a copy, or
// from the copy when the network fails or is too slow.
async function pageFirst(req, path) {
  const cache = await caches.open(PAGE_CACHE);
  const fromNetwork = fetch(req).then(async (res) => {
    if (res.ok && !res.redirected && res.type === 'basic') {
      await cache.put(path, res.clone());
    }
    return res;
  });
  fromNetwork.catch(() => {}); // answered from the copy: the failure is not the page's
  let timer;
  const slow = new Promise((resolve) => { timer = setTimeout(resolve, PAGE_TIMEOUT_MS); });
  try {
    const res = await Promise.race([fromNetwork, slow]);
    if (res) { return res; }
    const kept = await cache.match(path);
    return kept || await fromNetwork;
  } catch (err) {
    const kept = await cache.match(path);
    if (kept) { return kept; }
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

// assetFirst answers a static file from the cache (the version in the
// worker's name changes with any of them), else from the network.
async function assetFirst(req, path) {
  const kept = await caches.match(path, { ignoreSearch: true });
  if (kept) { return kept; }
  const res = await fetch(req);
  if (res.ok && res.type === 'basic') {
    const cache = await caches.open(ASSET_CACHE);
    await cache.put(path, res.clone());
  }
  return res;
}

// A page asks, once it is loaded, that the files it uses and the page
// itself be kept (the first load of a page was not the worker's to see);
// the answer says when they are.
self.addEventListener('message', (event) => {
  const msg = event.data || {};
  const port = event.ports && event.ports[0];
  if (msg.type !== 'keep' || !port) { return; }
  event.waitUntil(keep(msg).then(
    () => port.postMessage({ ok: true, version: VERSION }),
    (err) => port.postMessage({ ok: false, error: String(err) })));
});

async function keep(msg) {
  const assets = await caches.open(ASSET_CACHE);
  const urls = (Array.isArray(msg.urls) ? msg.urls : []).filter((u) => typeof u === 'string' && u.startsWith(STATIC));
  await Promise.all(urls.map(async (u) => {
    if (!(await assets.match(u))) { await assets.add(u); }
  }));
  if (typeof msg.page === 'string' && PAGE.test(msg.page)) {
    const pages = await caches.open(PAGE_CACHE);
    if (msg.fetch || !(await pages.match(msg.page))) {
      const res = await fetch(msg.page, { credentials: 'same-origin' });
      if (!res.ok || res.redirected) { throw new Error('the page answered ' + res.status); }
      await pages.put(msg.page, res);
    }
  }
}
