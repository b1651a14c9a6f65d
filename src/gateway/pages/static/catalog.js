// The catalog's table: sort by a column, filter by the text box, copy the srun line.
// Text only ever enters the page through textContent; nothing here builds HTML.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const table = document.getElementById("catalog");
  const filter = document.getElementById("filter");
  const shown = document.getElementById("shown");
  if (table) {
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    const key = (row, column) => {
      const cell = row.cells[column];
      return cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    };
    table.querySelectorAll("thead th").forEach((th, column) => {
      th.querySelector("button").addEventListener("click", () => {
        const ascending = th.getAttribute("aria-sort") !== "ascending";
        const numeric = th.dataset.type === "number";
        table.querySelectorAll("thead th").forEach((other) => other.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        rows.sort((a, b) => {
          const x = key(a, column), y = key(b, column);
          const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
          return ascending ? order : -order;
        });
        rows.forEach((row) => body.appendChild(row));
      });
    });
    const apply = () => {
      const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
      let count = 0;
      rows.forEach((row) => {
        row.hidden = !words.every((word) => row.dataset.search.includes(word));
        count += row.hidden ? 0 : 1;
      });
      shown.textContent = `${count} of ${rows.length} shown`;
    };
    filter.addEventListener("input", apply);
    apply();
  }
  document.querySelectorAll("button[data-copy]").forEach((button) => {
    button.addEventListener("click", () => {
      const text = document.getElementById(button.dataset.copy).textContent;
      const done = () => { button.textContent = "Copied"; };
      if (navigator.clipboard) {
        navigator.clipboard.writeText(text).then(done, () => { button.textContent = "Select and copy"; });
      } else {
        window.getSelection().selectAllChildren(document.getElementById(button.dataset.copy));
      }
    });
  });
});
