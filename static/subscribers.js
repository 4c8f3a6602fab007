// The subscriber table's selection: "select everyone on this page", a live count of the
// ticked people, and "select all matching". Without JavaScript the same form works: tick
// people, or choose "all matching" in "Apply to". Delegated on the document, since htmx
// swaps the table on every search.
(function () {
  "use strict";
  function ticks() { return Array.from(document.querySelectorAll('input[name="ids"][form="bulk-form"]')); }
  function refresh() {
    var boxes = ticks();
    var ticked = boxes.filter(function (b) { return b.checked; }).length;
    var option = document.getElementById("scope-selected");
    if (option) {
      // The words come from the page, in the owner's language (data-one, data-many).
      option.textContent = ticked === 1 ? option.dataset.one
        : option.dataset.many.replace("{n}", String(ticked));
    }
    var page = document.getElementById("select-page");
    if (page) {
      page.checked = boxes.length > 0 && ticked === boxes.length;
      page.indeterminate = ticked > 0 && ticked < boxes.length;
    }
    var note = document.getElementById("select-all-note");
    if (note) { note.hidden = !(page && page.checked); }
  }
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.id === "select-page") {
      ticks().forEach(function (b) { b.checked = target.checked; });
    }
    if (target.id === "select-page" || (target.name === "ids" && target.getAttribute("form") === "bulk-form")) {
      var scope = document.getElementById("bulk-scope");
      if (scope) { scope.value = "selected"; }
      refresh();
    }
  });
  document.addEventListener("click", function (event) {
    if (event.target.id === "select-all-matching") {
      var scope = document.getElementById("bulk-scope");
      if (scope) { scope.value = "all"; scope.focus(); }
      var note = document.getElementById("select-all-note");
      if (note) { note.textContent = event.target.dataset.chosen; }
    }
  });
  document.addEventListener("DOMContentLoaded", refresh);
  document.addEventListener("htmx:afterSettle", refresh);
})();
