// Templates and blocks: "Insert block" in the broadcast editor, colour swatches, and the
// confirmation of a delete. No inline script (the pages' CSP): everything is wired here.
(function () {
  "use strict";

  // A block's reference on a line of its own at the cursor of the body's editor. Another
  // editor (rich text) may take the event and insert it itself, calling preventDefault().
  function insertReference(target, text) {
    var event = new CustomEvent("broadside:insert-block",
      { detail: { target: target, text: text }, cancelable: true });
    if (!document.dispatchEvent(event)) return;
    var trix = document.querySelector('trix-editor[input="' + target + '"]');
    if (trix && trix.editor && trix.offsetParent !== null) {
      trix.editor.insertHTML("<div>" + text.replace(/&/g, "&amp;").replace(/</g, "&lt;") + "</div>");
      return;
    }
    var area = document.getElementById(target);
    if (!area) return;
    var start = area.selectionStart != null ? area.selectionStart : area.value.length;
    var end = area.selectionEnd != null ? area.selectionEnd : start;
    var before = area.value.slice(0, start), after = area.value.slice(end);
    var lead = before === "" || /\n$/.test(before) ? "" : "\n";
    var tail = /^\n/.test(after) ? "" : "\n";
    area.value = before + lead + text + tail + after;
    var caret = (before + lead + text + tail).length;
    area.focus();
    area.setSelectionRange(caret, caret);
    area.dispatchEvent(new Event("input", { bubbles: true }));  // the autosave follows
  }

  function wire() {
    var button = document.getElementById("insert-block");
    var choice = document.getElementById("insert-block-name");
    if (button && choice) {
      button.hidden = false;
      button.addEventListener("click", function () {
        insertReference(button.getAttribute("data-target"), choice.value);
      });
    }
    document.querySelectorAll(".swatch[data-colour]").forEach(function (swatch) {
      swatch.style.backgroundColor = swatch.getAttribute("data-colour");
    });
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
