"""Small helpers the view tests share: draw a figure, check its labels, read its legend, spot a message figure."""

from matplotlib.backends.backend_agg import FigureCanvasAgg


def _draw(fig):
    FigureCanvasAgg(fig).draw()
    return fig


def _labelled(ax):
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title(), (ax.get_xlabel(), ax.get_ylabel(), ax.get_title())


def _legend(ax):
    return ax.get_legend_handles_labels()[1]


def _is_message(fig):
    return not fig.axes and any("cannot draw" in t.get_text() for t in fig.texts)
