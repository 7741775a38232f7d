package sim

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// figure is the picture of a scenario: a title over one or more plots
// stacked vertically. [figure.WriteSVG] draws it with the standard library
// only.
type figure struct {
	Title string
	Plots []chart
}

// chart is one plot of a figure: series drawn as lines over shared x and y axes. A
// linear y axis always includes zero.
type chart struct {
	Title          string
	XLabel, YLabel string
	Series         []curve
	// LogY draws the y axis in powers of ten; points at or below zero are
	// left out.
	LogY bool
}

// curve is one line of a [chart].
type curve struct {
	Name   string
	X, Y   []float64 // the points, in increasing X
	Step   bool      // hold each value until the next point (a step chart)
	Dashed bool      // draw dashed (reference lines such as a hidden limit)
	Dots   bool      // draw each point as a dot, with no line (a scatter)
	Color  string    // an SVG colour; empty picks the next of the palette
}

// palette is the Okabe–Ito colour-blind safe palette, without its yellow
// (too pale on white).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"}

// Sizes of the drawing, in SVG user units (pixels).
const (
	svgWidth     = 960
	svgTitleH    = 44
	svgPlotH     = 330
	svgLeft      = 78
	svgRight     = 210 // room for the legend
	svgTop       = 34  // above each plot's area: its title
	svgBottom    = 52  // below each plot's area: tick labels and x label
	svgFontStack = "DejaVu Sans, Helvetica, Arial, sans-serif"
)

// WriteSVG draws f as a standalone SVG document. The output depends only on
// f, byte for byte.
func (f figure) WriteSVG(w io.Writer) error {
	var b strings.Builder
	h := svgTitleH + len(f.Plots)*svgPlotH + 8
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n",
		svgWidth, h, svgWidth, h, svgFontStack)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="19" font-weight="bold" text-anchor="middle">%s</text>`+"\n",
		svgWidth/2, esc(f.Title))
	for i, p := range f.Plots {
		p.draw(&b, svgTitleH+i*svgPlotH)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func esc(s string) string { return html.EscapeString(s) }

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func (p chart) draw(b *strings.Builder, top int) {
	a := p.area(top)
	fmt.Fprintf(b, `<text x="%s" y="%s" font-size="15" font-weight="bold" text-anchor="middle">%s</text>`+"\n",
		num((a.x0+a.x1)/2), num(a.y0-12), esc(p.Title))
	a.drawGrid(b)
	a.drawAxes(b, p.XLabel, p.YLabel)
	colors := p.colors()
	for i, s := range p.Series {
		a.drawSeries(b, s, colors[i])
	}
	a.drawLegend(b, p.Series, colors)
}

// plotArea is where a plot draws, in SVG units, and the scales and
// ticks of its axes.
type plotArea struct {
	x0, x1, y0, y1         float64 // y0 top, y1 bottom
	xmin, xmax, ymin, ymax float64 // the values at the edges
	xt, yt                 []float64
	logY                   bool
	lo, hi                 float64 // with logY: the exponents at the edges
}

// area lays out p's axes on the plot whose top edge is at top: x spans
// the data, y the data and its outer ticks (on a linear axis, from zero).
func (p chart) area(top int) *plotArea {
	a := &plotArea{
		x0: float64(svgLeft), x1: float64(svgWidth - svgRight),
		y0: float64(top + svgTop), y1: float64(top + svgPlotH - svgBottom),
		logY: p.LogY,
	}
	a.xmin, a.xmax, a.ymin, a.ymax = p.dataRange()
	a.xt = ticks(a.xmin, a.xmax, 8)
	if p.LogY {
		for v := a.ymin; v <= a.ymax; v++ {
			a.yt = append(a.yt, v)
		}
	} else {
		a.yt = ticks(a.ymin, a.ymax*1.05, 6)
	}
	// Extend y to the outer ticks, keep x to the data.
	a.ymin, a.ymax = min(a.ymin, a.yt[0]), max(a.ymax, a.yt[len(a.yt)-1])
	if p.LogY {
		// The ticks are exponents: put the grid at 10^k and label it so.
		a.lo, a.hi = a.ymin, a.ymax
		for i, e := range a.yt {
			a.yt[i] = math.Pow(10, e)
		}
		a.ymin, a.ymax = math.Pow(10, a.ymin), math.Pow(10, a.ymax)
	}
	return a
}

// dataRange is the range of p's points, on a log y axis in powers of ten
// (whole exponents, the points at or below zero left out); never empty.
func (p chart) dataRange() (xmin, xmax, ymin, ymax float64) {
	// fy maps a value to the y axis' scale: itself, or its log10.
	fy := func(v float64) float64 { return v }
	if p.LogY {
		fy = math.Log10
	}
	xmin, xmax = math.Inf(1), math.Inf(-1)
	ymin, ymax = 0.0, 0.0
	if p.LogY {
		ymin, ymax = math.Inf(1), math.Inf(-1)
	}
	for _, s := range p.Series {
		for i := range s.X {
			if p.LogY && !(s.Y[i] > 0) {
				continue
			}
			xmin, xmax = min(xmin, s.X[i]), max(xmax, s.X[i])
			ymin, ymax = min(ymin, fy(s.Y[i])), max(ymax, fy(s.Y[i]))
		}
	}
	if p.LogY {
		if ymin > ymax {
			ymin, ymax = 0, 1
		}
		ymin, ymax = math.Floor(ymin), math.Ceil(ymax)
	}
	if xmin > xmax {
		xmin, xmax = 0, 1
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax == ymin {
		ymax = ymin + 1
	}
	return xmin, xmax, ymin, ymax
}

func (a *plotArea) sx(v float64) float64 { return a.x0 + (v-a.xmin)/(a.xmax-a.xmin)*(a.x1-a.x0) }

func (a *plotArea) sy(v float64) float64 {
	if a.logY {
		return a.y1 - (math.Log10(v)-a.lo)/(a.hi-a.lo)*(a.y1-a.y0)
	}
	return a.y1 - (v-a.ymin)/(a.ymax-a.ymin)*(a.y1-a.y0)
}

func (a *plotArea) ylabel(v float64) string {
	if a.logY {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return tickLabel(v, a.yt)
}

// drawGrid draws the grid lines and the ticks with their labels.
func (a *plotArea) drawGrid(b *strings.Builder) {
	b.WriteString(`<g font-size="12" fill="#333">` + "\n")
	for _, v := range a.yt {
		if v < a.ymin || v > a.ymax {
			continue
		}
		y := a.sy(v)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e3e3e3"/>`+"\n", num(a.x0), num(y), num(a.x1), num(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", num(a.x0-6), num(y+4), a.ylabel(v))
		if a.logY && v*10 <= a.ymax {
			for _, m := range []float64{2, 5} {
				y := a.sy(v * m)
				fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#f0f0f0"/>`+"\n", num(a.x0), num(y), num(a.x1), num(y))
			}
		}
	}
	for _, v := range a.xt {
		if v < a.xmin || v > a.xmax {
			continue
		}
		x := a.sx(v)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e3e3e3"/>`+"\n", num(x), num(a.y0), num(x), num(a.y1))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333"/>`+"\n", num(x), num(a.y1), num(x), num(a.y1+5))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(x), num(a.y1+19), tickLabel(v, a.xt))
	}
	b.WriteString("</g>\n")
}

// drawAxes draws the axes and their labels.
func (a *plotArea) drawAxes(b *strings.Builder, xlabel, ylabel string) {
	fmt.Fprintf(b, `<path d="M%s %sV%sH%s" fill="none" stroke="#333"/>`+"\n", num(a.x0), num(a.y0), num(a.y1), num(a.x1))
	fmt.Fprintf(b, `<text x="%s" y="%s" font-size="13" text-anchor="middle">%s</text>`+"\n",
		num((a.x0+a.x1)/2), num(a.y1+40), esc(xlabel))
	fmt.Fprintf(b, `<text transform="translate(%s %s) rotate(-90)" font-size="13" text-anchor="middle">%s</text>`+"\n",
		num(a.x0-56), num((a.y0+a.y1)/2), esc(ylabel))
}

// colors are the series' colours: their own, else the palette's in turn.
func (p chart) colors() []string {
	ci := 0
	colors := make([]string, len(p.Series))
	for i, s := range p.Series {
		c := s.Color
		if c == "" {
			c = palette[ci%len(palette)]
			ci++
		}
		colors[i] = c
	}
	return colors
}

// drawSeries draws s in colour c: dots, or a line (with a dot at each
// point when there are few).
func (a *plotArea) drawSeries(b *strings.Builder, s curve, c string) {
	// Points a log axis cannot show are left out.
	var pts [][2]float64
	for j := range s.X {
		if !a.logY || s.Y[j] > 0 {
			pts = append(pts, [2]float64{a.sx(s.X[j]), a.sy(s.Y[j])})
		}
	}
	if len(pts) == 0 {
		return
	}
	if s.Dots {
		for _, pt := range pts {
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.5" fill="%s" fill-opacity="0.8"/>`+"\n", num(pt[0]), num(pt[1]), c)
		}
		return
	}
	var d strings.Builder
	for j, pt := range pts {
		switch {
		case j == 0:
			fmt.Fprintf(&d, "M%s %s", num(pt[0]), num(pt[1]))
		case s.Step:
			fmt.Fprintf(&d, "H%sV%s", num(pt[0]), num(pt[1]))
		default:
			fmt.Fprintf(&d, "L%s %s", num(pt[0]), num(pt[1]))
		}
	}
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s/>`+"\n", d.String(), c, s.dash())
	if len(pts) <= 30 && !s.Step && !s.Dashed {
		for _, pt := range pts {
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", num(pt[0]), num(pt[1]), c)
		}
	}
}

// drawLegend draws each series' mark and name right of the plot.
func (a *plotArea) drawLegend(b *strings.Builder, series []curve, colors []string) {
	lx, ly := a.x1+18, a.y0+6
	for i, s := range series {
		y := ly + float64(i)*22
		if s.Dots {
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="4" fill="%s"/>`+"\n", num(lx+13), num(y), colors[i])
		} else {
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"%s/>`+"\n",
				num(lx), num(y), num(lx+26), num(y), colors[i], s.dash())
		}
		// About 7 px a character at 13 px: shrink names that would run off
		// the drawing.
		size := 13.0
		if n := len([]rune(s.Name)); n > 23 {
			size = max(8, 13*23/float64(n))
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="%s">%s</text>`+"\n", num(lx+32), num(y+4), num(size), esc(s.Name))
	}
}

// dash is the SVG attribute of a dashed series' stroke, else empty.
func (s curve) dash() string {
	if s.Dashed {
		return ` stroke-dasharray="7 5"`
	}
	return ""
}

// ticks returns about n round tick values (1, 2 or 5 times a power of ten
// apart) covering [lo, hi].
func ticks(lo, hi float64, n int) []float64 {
	step := niceStep((hi - lo) / float64(n))
	start := math.Floor(lo/step) * step
	var out []float64
	for i := 0; ; i++ {
		v := start + float64(i)*step
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		out = append(out, v)
		if v >= hi-step*1e-9 || i > 100 {
			break
		}
	}
	return out
}

func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	}
	return 10 * p
}

// tickLabel prints v with as many decimals as the tick step needs.
func tickLabel(v float64, ts []float64) string {
	prec := 0
	if len(ts) > 1 {
		step := ts[1] - ts[0]
		for prec < 6 && math.Abs(step*math.Pow(10, float64(prec))-math.Round(step*math.Pow(10, float64(prec)))) > 1e-6 {
			prec++
		}
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
