/* Printable study report: the print button (no inline handlers: the Content-Security-Policy forbids them). */
(function () {
  "use strict";
  const b = document.getElementById("print-study");
  if (b) b.addEventListener("click", () => window.print());
})();
