package cgroupfs

import "github.com/memcgd/memcgd/cgroupfs/layout"

// Layout and V1 are layout's, under the names that the tests of
// cgroupfs/dirtytrack use; they go once those tests import layout.
type Layout = layout.Layout

// V1 is layout.V1.
const V1 = layout.V1
