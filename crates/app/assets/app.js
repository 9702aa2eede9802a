// Tern's app: small enhancements only; every page works without this file.
// - <button data-copy="#id" hidden>Copy</button>: shown, copies the element's text (or an
//   input's value) to the clipboard and says "Copied".
// - <time datetime="RFC 3339">: shown in the browser's time zone, the UTC value on hover
//   (with seconds when it has data-seconds).
// - <details data-narrow-closed open>: the navigation; closed on small screens (a "Menu"
//   button), open again when the screen is wide (where its summary is hidden).
// - <div data-live="URL" data-final="false"> with [data-live-part="name"] children: every 2 s
//   (while the tab is visible) the fragment at URL is fetched and each part whose HTML
//   changed is replaced; polling stops once a fragment says data-final="true". The page's
//   own "Refresh" link ([data-live-refresh]) is hidden meanwhile.
"use strict";

(function () {
  function textOf(el) {
    return ("value" in el && typeof el.value === "string" ? el.value : el.textContent).trim();
  }

  async function copy(button) {
    const source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    const text = textOf(source);
    try {
      await navigator.clipboard.writeText(text);
    } catch (_) {
      // No clipboard access (insecure origin, denied): select the text for Ctrl+C.
      const range = document.createRange();
      range.selectNodeContents(source);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      return;
    }
    const label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    button.textContent = "Copied";
    clearTimeout(button._ternTimer);
    button._ternTimer = setTimeout(function () { button.textContent = label; }, 2000);
  }

  function pad(n) { return String(n).padStart(2, "0"); }

  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      const d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) return;
      t.title = d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) +
        " " + pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + " UTC";
      // data-seconds: where seconds matter (a timeline's entries, retries seconds apart).
      const timeStyle = t.hasAttribute("data-seconds") ? "medium" : "short";
      t.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: timeStyle });
    });
  }

  function narrowMenus() {
    const narrow = window.matchMedia("(max-width: 40rem)");
    const apply = function () {
      document.querySelectorAll("details[data-narrow-closed]").forEach(function (d) {
        d.open = !narrow.matches;
      });
    };
    apply();
    narrow.addEventListener("change", apply);
  }

  const LIVE_EVERY_MS = 2000;

  function live(root) {
    const url = root.getAttribute("data-live");
    let timer = null;
    let busy = false;

    function isFinal() { return root.getAttribute("data-final") === "true"; }

    function schedule() {
      clearTimeout(timer);
      timer = null;
      if (!isFinal() && !document.hidden) timer = setTimeout(poll, LIVE_EVERY_MS);
    }

    function swap(fresh) {
      const focused = document.activeElement && root.contains(document.activeElement)
        ? document.activeElement.id : "";
      root.querySelectorAll("[data-live-part]").forEach(function (part) {
        const name = part.getAttribute("data-live-part");
        const next = fresh.querySelector('[data-live-part="' + name + '"]');
        if (!next || next.innerHTML === part.dataset.liveHtml) return;
        part.innerHTML = next.innerHTML;
        part.dataset.liveHtml = next.innerHTML;
        localTimes(part);
        part.querySelectorAll("button[data-copy]").forEach(function (b) { b.hidden = false; });
      });
      root.setAttribute("data-final", fresh.getAttribute("data-final") || "true");
      if (focused) {
        const again = document.getElementById(focused);
        if (again && again !== document.activeElement) again.focus();
      }
      if (isFinal()) {
        root.querySelectorAll("[data-live-refresh]").forEach(function (a) { a.hidden = true; });
      }
    }

    async function poll() {
      if (busy || isFinal()) return;
      busy = true;
      try {
        const res = await fetch(url, { credentials: "same-origin", cache: "no-store",
          headers: { "Accept": "text/html" } });
        // Signed out, gone, or an error: stop quietly; the Refresh link still works.
        if (!res.ok || res.redirected) { root.setAttribute("data-final", "true"); return; }
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        const fresh = doc.querySelector("[data-live]");
        if (fresh) swap(fresh);
      } catch (_) {
        // A network blip: try again next time.
      } finally {
        busy = false;
        schedule();
      }
    }

    // The HTML as served, to compare the fragments' parts with (not the localised times).
    root.querySelectorAll("[data-live-part]").forEach(function (part) {
      part.dataset.liveHtml = part.innerHTML;
    });
    if (isFinal()) return;
    root.querySelectorAll("[data-live-refresh]").forEach(function (a) { a.hidden = true; });
    document.addEventListener("visibilitychange", function () {
      if (document.hidden) { clearTimeout(timer); timer = null; } else if (!timer) { poll(); }
    });
    schedule();
  }

  function start() {
    narrowMenus();
    document.querySelectorAll("button[data-copy]").forEach(function (b) {
      b.hidden = false;
      b.setAttribute("aria-live", "polite");
    });
    // Before localTimes: the parts' served HTML is what later fragments are compared with.
    document.querySelectorAll("[data-live]").forEach(live);
    localTimes(document);
  }

  document.addEventListener("click", function (ev) {
    const button = ev.target.closest("button[data-copy]");
    if (button) {
      ev.preventDefault();
      copy(button);
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
