package images

import "strings"

// SvclabLinks are the program names the images link to the svclab binary,
// for the tests of package images_test.
func SvclabLinks() []string {
	var names []string
	for _, entries := range treeLayers() {
		for _, e := range entries {
			if e.link == svclabPath {
				names = append(names, e.path[strings.LastIndex(e.path, "/")+1:])
			}
		}
	}
	return names
}
