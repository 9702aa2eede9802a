// Tern's app: small enhancements only; every page works without this file.
// - <button data-copy="#id" hidden>Copy</button>: shown, copies the element's text (or an
//   input's value) to the clipboard and says "Copied".
// - <time datetime="RFC 3339">: shown in the browser's time zone, the UTC value on hover.
// - <details data-narrow-closed open>: the navigation; closed on small screens (a "Menu"
//   button), open again when the screen is wide (where its summary is hidden).
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
      t.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
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

  function start() {
    narrowMenus();
    document.querySelectorAll("button[data-copy]").forEach(function (b) {
      b.hidden = false;
      b.setAttribute("aria-live", "polite");
    });
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
