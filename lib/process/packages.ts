/**
 * Which Debian package provides each binary Hydrazine runs, so that a missing one is
 * reported as "install X" rather than as ENOENT.
 */
export const debianPackageOf: Readonly<Record<string, string>> = {
  'redis-server': 'redis-server',
  'redis-cli': 'redis-tools',
  'ovsdb-server': 'openvswitch-common',
  'ovsdb-tool': 'openvswitch-common',
  'ovsdb-client': 'openvswitch-common',
  'ovs-vswitchd': 'openvswitch-switch',
  'ovs-vsctl': 'openvswitch-switch',
  'ovs-appctl': 'openvswitch-common',
  'ovn-northd': 'ovn-central',
  'ovn-nbctl': 'ovn-common',
  'ovn-sbctl': 'ovn-common',
  'ovn-trace': 'ovn-common',
  'ovn-controller': 'ovn-host',
  mmdebstrap: 'mmdebstrap',
  '/usr/lib/frr/zebra': 'frr',
  '/usr/lib/frr/bgpd': 'frr',
  '/usr/lib/frr/staticd': 'frr',
  '/usr/lib/frr/frr-reload.py': 'frr',
  vtysh: 'frr',
  dhcrelay: 'isc-dhcp-relay',
  dnsmasq: 'dnsmasq',
  ip: 'iproute2',
  ethtool: 'ethtool',
  ping: 'iputils-ping',
}
