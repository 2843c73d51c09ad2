// Progressive enhancement only; every page works without it.
// A table that scrolls sideways inside its box (narrow screens) must be reachable by keyboard:
// give it a tab stop and a name while it overflows (axe: scrollable-region-focusable).
(function () {
  "use strict";
  function markScrollable() {
    document.querySelectorAll("table, pre").forEach(function (el) {
      if (el.scrollWidth > el.clientWidth + 1) {
        el.setAttribute("tabindex", "0");
        if (!el.hasAttribute("aria-label") && el.tagName === "TABLE") {
          var caption = el.querySelector("caption");
          el.setAttribute("aria-label", caption ? caption.textContent.trim() : "table (scrolls sideways)");
        }
      } else if (el.getAttribute("tabindex") === "0") {
        el.removeAttribute("tabindex");
      }
    });
  }
  // A one-time secret is selected on focus, ready to copy (an inline onfocus would break the CSP).
  document.addEventListener("focusin", function (event) {
    if (event.target.classList && event.target.classList.contains("secret-value")) { event.target.select(); }
  });
  window.addEventListener("resize", markScrollable);
  document.addEventListener("DOMContentLoaded", markScrollable);
})();
