package lab

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The experiments run the daemon at the unit's Nice=, so that their
// figures are those of the daemon as deployed.
func TestDeployNiceIsTheUnits(t *testing.T) {
	f, err := os.Open("../../../deploy/memcgd.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Nice=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("deploy/memcgd.service: Nice=%q: %v", v, err)
		}
		if n != DeployNice {
			t.Errorf("deploy/memcgd.service has Nice=%d, lab.DeployNice is %d", n, DeployNice)
		}
		return
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Errorf("deploy/memcgd.service sets no Nice=; lab.DeployNice is %d", DeployNice)
}
