package console

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Charts are drawn on the server as SVG (the chart template): no script, no asset from elsewhere, and readable
// without JavaScript. The geometry is computed here; colours come from the stylesheet's classes.

// barChart is a stacked bar chart of two series (the lower and the upper part of each bar), in the units of its
// viewBox.
type barChart struct {
	Width, Height int
	// Left, Top, Right, Bottom bound the plot area.
	Left, Top, Right, Bottom float64
	Bars                     []chartBar
	YTicks, XTicks           []chartTick
	// Label describes the chart for screen readers; Class is the stylesheet's variant of it ("" or "health").
	Label, Class string
	// Empty is set when no bar has a value; EmptyText is what the chart then says, in the words of what it counts.
	Empty     bool
	EmptyText string
}

// chartBar is one bucket: Lower is drawn from the axis up, Upper above it.
type chartBar struct {
	X, W           float64
	LowerY, LowerH float64
	UpperY, UpperH float64
	Title          string
	Lower, Upper   int64
}

type chartTick struct {
	Pos   float64
	Label string
}

// chartPoint is one bucket's values.
type chartPoint struct {
	Start        time.Time
	Lower, Upper int64
	Title        string
}

const (
	chartWidth  = 760
	chartHeight = 240
)

// newBarChart lays out points (oldest first); label formats a bucket start for the x axis, every few bars; describe
// is the chart's description and empty what it says when it has nothing to show.
func newBarChart(points []chartPoint, label func(time.Time) string, describe, empty string) barChart {
	c := barChart{Width: chartWidth, Height: chartHeight, Left: 48, Top: 12, Right: chartWidth - 8,
		Bottom: chartHeight - 28, Label: describe, EmptyText: empty}
	var top int64
	for _, p := range points {
		top = max(top, p.Lower+p.Upper)
	}
	c.Empty = top == 0
	scale := niceCeil(top)
	plotH := c.Bottom - c.Top
	for i := 0; i <= 4; i++ {
		v := scale * int64(i) / 4
		c.YTicks = append(c.YTicks, chartTick{Pos: c.Bottom - plotH*float64(v)/float64(scale), Label: compact(v)})
	}
	if len(points) == 0 {
		return c
	}
	slot := (c.Right - c.Left) / float64(len(points))
	gap := math.Min(slot*0.2, 4)
	every := max(1, int(math.Ceil(float64(len(points))/8)))
	for i, p := range points {
		x := c.Left + slot*float64(i)
		b := chartBar{X: x + gap/2, W: math.Max(slot-gap, 1), Lower: p.Lower, Upper: p.Upper, Title: p.Title}
		b.LowerH = plotH * float64(p.Lower) / float64(scale)
		b.LowerY = c.Bottom - b.LowerH
		b.UpperH = plotH * float64(p.Upper) / float64(scale)
		b.UpperY = b.LowerY - b.UpperH
		c.Bars = append(c.Bars, b)
		if i%every == 0 {
			c.XTicks = append(c.XTicks, chartTick{Pos: x + slot/2, Label: label(p.Start)})
		}
	}
	return c
}

// niceCeil is the top of a y axis of four ticks at least v high, each tick 1, 2 or 5 times a power of ten.
func niceCeil(v int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, step := range []int64{p, 2 * p, 5 * p} {
			if 4*step >= v {
				return 4 * step
			}
		}
	}
}

// compact writes a count the short way: 950, 1.2k, 3.4M.
func compact(n int64) string {
	switch {
	case n >= 1_000_000:
		return trimZero(float64(n)/1_000_000) + "M"
	case n >= 10_000:
		return strconv.FormatInt(n/1000, 10) + "k"
	case n >= 1000:
		return trimZero(float64(n)/1000) + "k"
	}
	return strconv.FormatInt(n, 10)
}

func trimZero(f float64) string {
	s := fmt.Sprintf("%.1f", f)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}
