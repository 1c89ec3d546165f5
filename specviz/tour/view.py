"""The tour's HTML: an open button, and a sheet fixed to the bottom of the screen with "◀ Previous chapter", the
chapter list, "Next chapter ▶" (named apart from the step scrubbers' "Next ▶"; a phone shows their arrows only,
beside the chapter list, so the row stays one line), a link to the chapter, "Hide text" (the sheet folds to its
buttons, so the whole page under it shows; the next chapter unfolds it) and the chapter itself (its words, its
question with the answer on reveal). A phone's chapter list shows "Chapter 4 of 9 ▾" over the list (the native
list, still the control, cut "4. A sampled step: min(1, p/q) a"; the chapter's title is the sheet's heading there). Every chapter is in the page from the start; the controller (controller.py)
shows one and sets its view."""

from __future__ import annotations

from html import escape

from specviz.tour.chapter import Chapter


def chapter_html(number: int, chapter: Chapter) -> str:
    """One chapter's section, hidden until the controller shows it; its view as JSON for the controller."""
    text, question, answer = (escape(words) for words in chapter.words)
    return (f"<section class='sv-tour-chapter' data-n='{number}' data-view='{escape(chapter.view.to_json())}' hidden>"
            f"<h3><span class='sv-tour-no'>{number}</span> {escape(chapter.title)}</h3>"
            f"<p class='sv-tour-text'>{text}</p>"
            f"<details class='sv-tour-question'><summary><b>Check on screen:</b> {question} "
            "<span class='sv-tour-reveal'>Show the answer</span></summary>"
            f"<p class='sv-tour-answer'>{answer}</p></details></section>")


def tour_html(chapters: tuple[Chapter, ...]) -> str:
    """The whole tour (empty when no chapter could be built: the page then offers no tour)."""
    if not chapters:
        return ""
    options = "".join(f"<option value='{n}'>{n}. {escape(c.title)}</option>" for n, c in enumerate(chapters, 1))
    sections = "".join(chapter_html(n, c) for n, c in enumerate(chapters, 1))
    return (f"<div class='sv-tour' data-open='0' data-count='{len(chapters)}'>"
            f"<button type='button' class='sv-tour-open'>Guided tour ({len(chapters)} chapters)</button>"
            "<div class='sv-tour-sheet' role='region' aria-label='Guided tour'>"
            "<div class='sv-tour-nav'>"
            "<button type='button' class='sv-tour-back' aria-label='Previous chapter' title='Previous chapter'>"
            "◀<span class='sv-tour-word'> Previous chapter</span></button>"
            f"<span class='sv-tour-pick'><span class='sv-tour-pick-label' aria-hidden='true'>Chapter 1 of "
            f"{len(chapters)} ▾</span><select class='sv-tour-list' aria-label='Chapters'>{options}</select></span>"
            "<button type='button' class='sv-tour-next' aria-label='Next chapter' title='Next chapter'>"
            "<span class='sv-tour-word'>Next chapter </span>▶</button>"
            "<a class='sv-tour-link' href='?tour=1' title='A link that opens the page at this chapter'>link</a>"
            "<button type='button' class='sv-tour-fold' aria-expanded='true' aria-label='Hide the chapter text' "
            "title='Hide the chapter text, to see the page under it'>▾<span class='sv-tour-word'> Hide text</span>"
            "</button>"
            "<button type='button' class='sv-tour-close' aria-label='Close the tour'>✕</button></div>"
            f"{sections}<p class='sv-tour-status' aria-live='polite'></p></div></div>")
