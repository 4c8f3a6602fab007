// The plain-text part's field (templates/*/_text_field.html, _step_text.html): choosing
// "Write my own" starts the text area from the automatic text as it is now (the body may have
// changed since the page was drawn), unless the owner has already written there.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var radio = event.target;
    if (!radio.matches || !radio.matches(".text-part input[type=radio]") || !radio.checked) return;
    var part = radio.closest(".text-part");
    var area = part.querySelector(".text-part-own textarea");
    var automatic = part.querySelector(".text-automatic");
    if (radio.value !== "own" || !area) return;
    if (area.dataset.fromAutomatic === "true" && automatic) {
      area.value = automatic.textContent;
      area.dataset.fromAutomatic = "false";
    }
    area.focus();
  });
})();
