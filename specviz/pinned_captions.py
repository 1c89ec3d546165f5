"""A phone's draft tree scrolls sideways in its box (specviz/style.py SIZES_CSS: TREE_MIN_PX wide), and its title,
caption and legend, drawn by Plotly inside the figure, scrolled away with it: after a swipe only stubs of the
caption showed at the left (issue #41). The page's load script `PIN_CAPTIONS_JS` keeps them in the box's visible
part: whenever a tree's box scrolls, or Plotly redraws inside it, the title group (title and caption, wrapped to
the screen's width), the legend, the axis titles and the gather's title are moved right by the box's scroll (a CSS transform over the group's own
`translate`), so the words stay put while the tree moves under them."""

from __future__ import annotations

SCROLLING_TREES = "#sv-tree, #sv-lab-tree"      # the boxes SIZES_CSS lets scroll sideways
PINNED_PARTS = ".g-gtitle, .legend"             # Plotly's title-and-caption group and its legend
# and the annotations named so (specviz/figures/tree.py): a phone's axis titles and the gather's title, words at
# the figure's left edge with no cells under them; not the gather's row labels, which cells would slide under
PINNED_NOTES = ("axis title", "panel title")

PIN_CAPTIONS_JS = f"""() => {{
  const named = (box) => {{
    const plot = box.querySelector('.js-plotly-plot'), notes = (plot && plot.layout && plot.layout.annotations) || [];
    return [...box.querySelectorAll('.annotation')].filter((g) => {{
      const note = notes[Number(g.dataset.index)];
      return !!note && {list(PINNED_NOTES)!r}.includes(note.name);
    }});
  }};
  const pin = (box) => {{
    for (const part of [...box.querySelectorAll('{PINNED_PARTS}'), ...named(box)]) {{
      const at = (part.getAttribute('transform') || '').match(/translate\\(\\s*([-\\d.e]+)[\\s,]+([-\\d.e]+)\\s*\\)/);
      const [x, y] = at ? [Number(at[1]), Number(at[2])] : [0, 0];
      part.style.transform = box.scrollLeft ? `translate(${{x + box.scrollLeft}}px, ${{y}}px)` : '';
    }}
  }};
  document.addEventListener('scroll', (event) => {{
    if (event.target instanceof Element && event.target.matches('{SCROLLING_TREES}')) pin(event.target);
  }}, true);
  new MutationObserver(() => document.querySelectorAll('{SCROLLING_TREES}').forEach((box) => {{
    if (box.scrollLeft || box.querySelector('[style*="translate"]')) pin(box);
  }})).observe(document.body, {{childList: true, subtree: true, attributes: true, attributeFilter: ['transform']}});
}}"""
