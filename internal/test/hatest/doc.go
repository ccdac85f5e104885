// Package hatest holds the tests of the highly available authority: two
// real instances under the chaos workload on a pg_auto_failover formation
// (internal/test/testenv) whose primary is killed, whose standby is lost, or
// which switches over, and the comparison of every acknowledged answer
// with the rows and events the surviving server holds. make test-ha runs
// them (TEST_HA=1); make test's own failover is TestChaos's.
package hatest
