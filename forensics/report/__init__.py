"""The postmortem report: its model (model), timeline data (timeline), chart (chart), and the HTML
and Markdown renderings (html, markdown, template)."""
