package sim

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// ErrFormat is returned by [Result.WriteTable] for an unknown output
// format.
var ErrFormat = errors.New("sim: unknown format")

// formats lists the output formats of table.Write.
var formats = []string{"table", "json", "csv"}

// column is one column of a [table].
type column struct {
	Name string // machine name: the JSON key and the CSV header
	Prec int    // decimals printed for float64 values
}

// table is a scenario's result: columns and rows of values. Each value is
// a string, an int, a float64 or nil (no value: null in JSON). Its output
// is stable: the same table always prints the same bytes, so other tools
// can read it.
type table struct {
	Columns []column
	Rows    [][]any
}

// Write prints t to w in format: "table" (aligned text for people), "json"
// (an array of objects whose keys are the column names, in column order)
// or "csv" (a header line of column names, then one line per row).
func (t table) Write(w io.Writer, format string) error {
	switch format {
	case "table", "":
		return t.writeText(w)
	case "json":
		return t.writeJSON(w)
	case "csv":
		return t.writeCSV(w)
	}
	return fmt.Errorf("%w %q (want %s)", ErrFormat, format, strings.Join(formats, ", "))
}

func (t table) cell(i int, v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', t.Columns[i].Prec, 64)
	case nil:
		return "" // no value: empty in CSV, "-" in the text table, null in JSON
	}
	return fmt.Sprint(v)
}

func (t table) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var b strings.Builder
	for _, c := range t.Columns {
		b.WriteString(c.Name)
		b.WriteByte('\t')
	}
	fmt.Fprintln(tw, b.String())
	for _, r := range t.Rows {
		b.Reset()
		for i, v := range r {
			if v == nil {
				b.WriteString("-\t")
				continue
			}
			b.WriteString(t.cell(i, v))
			b.WriteByte('\t')
		}
		fmt.Fprintln(tw, b.String())
	}
	return tw.Flush()
}

func (t table) writeJSON(w io.Writer) error {
	var b strings.Builder
	b.WriteString("[")
	for ri, r := range t.Rows {
		if ri > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  {")
		for i, v := range r {
			if i > 0 {
				b.WriteString(", ")
			}
			k, _ := json.Marshal(t.Columns[i].Name)
			b.Write(k)
			b.WriteString(": ")
			if s, ok := v.(string); ok {
				q, _ := json.Marshal(s)
				b.Write(q)
			} else if v == nil {
				b.WriteString("null")
			} else {
				b.WriteString(t.cell(i, v))
			}
		}
		b.WriteString("}")
	}
	if len(t.Rows) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (t table) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		head[i] = c.Name
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range t.Rows {
		rec := make([]string, len(r))
		for i, v := range r {
			rec[i] = t.cell(i, v)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
