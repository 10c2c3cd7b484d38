package safeio

import "testing"

func TestSafeFSAllowsLocalDiskFilesystemsOnly(t *testing.T) {
	for fstype, want := range map[string]bool{
		"ext4": true, "xfs": true, "btrfs": true, "f2fs": true,
		"nfs": false, "nfs4": false, "cifs": false, "smb3": false, "ceph": false, "9p": false, "afs": false,
		"fuse": false, "fuse.sshfs": false, "fuseblk": false, "fuse.ext4": false,
		"tmpfs": false, "ramfs": false, "overlay": false, "proc": false, "": false,
	} {
		if got := SafeFS(fstype); got != want {
			t.Errorf("SafeFS(%q) = %v, want %v", fstype, got, want)
		}
	}
}
