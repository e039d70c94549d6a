package main

import "golang.org/x/sys/unix"

// isVeth asks the interface's driver (ethtool's, as `ethtool -i` does):
// "veth" is a virtual cable between network namespaces.
func isVeth(name string) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, name)
	return err == nil && unix.ByteSliceToString(info.Driver[:]) == "veth"
}
