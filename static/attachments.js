// The attachments field (templates/attachments/_field.html): "Remove" takes a file off this
// message (its row and hidden id go; the form saves the list, and an "input" event lets the
// broadcast editor's autosave see the change), the total is redrawn, and a refused upload's
// answer (422, the field with the reason) is shown rather than dropped by htmx.
// Loaded with `defer`; no inline script (strict CSP).
(function () {
  "use strict";
  function shown(size) {
    if (size >= 1048576) { return (size / 1048576).toFixed(1) + " MB"; }
    if (size >= 1024) { return Math.max(1, Math.round(size / 1024)) + " KB"; }
    return size + (size === 1 ? " byte" : " bytes");
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-remove-attachment]");
    if (!button) { return; }
    var field = button.closest(".attachments-field");
    var form = button.closest("form");
    button.closest("li").remove();
    var total = 0;
    field.querySelectorAll("li[data-size]").forEach(function (row) {
      total += parseInt(row.getAttribute("data-size"), 10) || 0;
    });
    var line = field.querySelector("[data-attachments-total]");
    if (line) {
      var limit = parseInt(line.getAttribute("data-limit"), 10) || 0;
      line.textContent = shown(total) + " of " + shown(limit) + " attached.";
      line.classList.toggle("error", total > limit);
    }
    var upload = field.querySelector("input[type=file]");
    if (upload) { upload.focus(); }
    if (form) { form.dispatchEvent(new Event("input", {bubbles: true})); }
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var elt = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (elt && elt.closest && elt.closest(".attachments-field") && event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();
