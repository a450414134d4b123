"""Component styles cached per widget, for the widgets that draw their own lines."""

from __future__ import annotations

from typing import Any

from rich.style import Style
from textual.widget import Widget


class CachedStyles(Widget):
    """`_style(name)`: the widget's own style (`""`) or a component class's, resolved once.
    Textual resolves them through the CSS cascade on every call (~0.1 ms each), which would
    otherwise dominate drawing a line. Forgotten whenever styles change (theme, focus). List it
    after the widget's Textual base (`class View(ScrollView, CachedStyles)`): Textual takes the
    default CSS along the first base only, and would miss ScrollView's (its overflow)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._styles: dict[tuple[str, bool], Style] = {}
        super().__init__(*args, **kwargs)

    def _style(self, name: str) -> Style:
        key = (name, self.has_focus)
        style = self._styles.get(key)
        if style is None:
            style = self._styles[key] = self.rich_style if name == "" else self._component(name)
        return style

    def _component(self, name: str) -> Style:
        """A component class's own style (applied over the widget's), its colour resolved as
        Textual resolves a widget's: Textual's partial style takes an `auto` colour ($text,
        $text-muted) as white and drops a colour's alpha ($foreground-muted), so rows in a
        light theme were white on light grey, and muted lines brighter than the text (QA)."""
        partial = self.get_component_rich_style(name, partial=True)
        styles = self.get_component_styles(name)
        if not styles.has_rule("color"):
            return partial
        background = self.background_colors[1]
        if styles.has_rule("background"):
            background += styles.background
        color = background.get_contrast_text(styles.color.a) if styles.auto_color else styles.color
        return partial + Style(color=(background + color).rich_color)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
