// The attachments field (templates/attachments/_field.html): "Remove" takes a file off this
// message (its row and hidden id go; the form saves the list, and an "input" event lets the
// broadcast editor's autosave see the change), the total is redrawn, and a refused upload's
// answer (422, the field with the reason) is shown rather than dropped by htmx.
// Loaded with `defer`; no inline script (strict CSP).
(function () {
  "use strict";
  // The words come from the template (`data-words` on the total's line), in the page's
  // language; numbers as the page's language writes them (<html lang>).
  function fill(text, values) {
    return String(text).replace(/\{(\w+)\}/g, function (hole, name) {
      return name in values ? String(values[name]) : hole;
    });
  }
  function shown(size, words) {
    var lang = document.documentElement.lang || "en";
    var number = function (n, digits) {
      return n.toLocaleString(lang, {minimumFractionDigits: digits, maximumFractionDigits: digits});
    };
    if (size >= 1048576) { return number(size / 1048576, 1) + " MB"; }
    if (size >= 1024) { return number(Math.max(1, Math.round(size / 1024)), 0) + " KB"; }
    return fill(words[size === 1 ? "byte" : "bytes"] || "{n} bytes", {n: number(size, 0)});
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-remove-attachment]");
    if (!button) { return; }
    var field = button.closest(".attachments-field");
    button.closest("li").remove();
    var total = 0;
    field.querySelectorAll("li[data-size]").forEach(function (row) {
      total += parseInt(row.getAttribute("data-size"), 10) || 0;
    });
    var line = field.querySelector("[data-attachments-total]");
    if (line) {
      var limit = parseInt(line.getAttribute("data-limit"), 10) || 0;
      var words = {};
      try { words = JSON.parse(line.getAttribute("data-words")); } catch (ignored) { words = {}; }
      line.textContent = fill(words.attached || "{total} of {limit} attached.",
                              {total: shown(total, words), limit: shown(limit, words)});
      line.classList.toggle("error", total > limit);
    }
    var upload = field.querySelector("input[type=file]");
    if (upload) { upload.focus(); }
    changed(field);
  });

  // The editor's autosave fires on "input" that changed a value (htmx's `changed`, judged per
  // element): the field's marker input takes a new value, then says so.
  function changed(field) {
    var marker = field && field.querySelector("input[type=hidden][name$='-present']");
    if (!marker) { return; }
    marker.value = String((parseInt(marker.value, 10) || 0) + 1);
    marker.dispatchEvent(new Event("input", {bubbles: true}));
  }
  // A file uploaded is on this message once the form is saved: tell the broadcast editor's
  // autosave (it listens for "input"); the other forms save with their button.
  var uploading = null;  // the id of the field whose upload is in flight
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    var field = elt && elt.closest && elt.closest(".attachments-field");
    if (field) { uploading = field.id; }
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (uploading) {
      var field = document.getElementById(uploading);
      uploading = null;
      changed(field);
    }
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var elt = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (elt && elt.closest && elt.closest(".attachments-field") && event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();
