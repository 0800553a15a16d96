// The review queue with the keyboard alone: j / k move to the next / previous item, Enter opens it (its link has
// the focus), x ticks it for a bulk resolve, / goes to the search box. Keys typed into a field are the field's.
(function () {
  "use strict";
  var rows = Array.prototype.slice.call(document.querySelectorAll("#queue tbody tr"));
  var current = -1;
  function move(to) {
    if (!rows.length) return;
    current = Math.max(0, Math.min(rows.length - 1, to));
    rows.forEach(function (row, i) { row.classList.toggle("current", i === current); });
    var link = rows[current].querySelector("a.item-link");
    if (link) link.focus();
  }
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) return;
    if (event.key === "j") { move(current + 1); event.preventDefault(); }
    else if (event.key === "k") { move(current - 1); event.preventDefault(); }
    else if (event.key === "x" && current >= 0) {
      var box = rows[current].querySelector("input[type=checkbox]");
      if (box && !box.disabled) box.checked = !box.checked;
      event.preventDefault();
    } else if (event.key === "/") {
      var search = document.getElementById("q");
      if (search) { search.focus(); search.select(); event.preventDefault(); }
    }
  });
})();
