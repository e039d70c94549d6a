// Package fill sets every exported field of a value, recursively, to a
// distinct non-zero value. Tests use it to prove that a round trip through
// a stored format keeps every field: one added to a type without a place in
// the format then fails a test instead of silently vanishing.
package fill

import (
	"fmt"
	"reflect"
	"strconv"
)

// Fill fills *v. skip names fields to leave zero by their dotted path from
// v ("Message.Media.Path"; slices and maps add nothing to the path). It
// returns an error for a field of a kind it cannot fill, so a new kind of
// field is noticed rather than left zero.
func Fill(v any, skip ...string) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("fill: want a non-nil pointer, got %T", v)
	}
	f := &filler{skip: map[string]bool{}}
	for _, s := range skip {
		f.skip[s] = true
	}
	return f.value(rv.Elem(), "")
}

type filler struct {
	n    int
	skip map[string]bool
}

func (f *filler) next() int { f.n++; return f.n }

func (f *filler) value(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + strconv.Itoa(f.next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.next()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.next()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()) + 0.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := f.value(p.Elem(), path); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		if err := f.value(s.Index(0), path); err != nil {
			return err
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		e := reflect.New(v.Type().Elem()).Elem()
		if err := f.value(k, path); err != nil {
			return err
		}
		if err := f.value(e, path); err != nil {
			return err
		}
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		// A string survives every format a test round-trips through.
		v.Set(reflect.ValueOf("s" + strconv.Itoa(f.next())))
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			p := sf.Name
			if path != "" {
				p = path + "." + sf.Name
			}
			if f.skip[p] {
				continue
			}
			if err := f.value(v.Field(i), p); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("fill: %s is a %s, which fill cannot fill", path, v.Kind())
	}
	return nil
}
