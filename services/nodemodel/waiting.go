// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodemodel

import "time"

// MaxWaitingWithin bounds the retry_within of a WAITING feed event: the
// longest a collector tells the monitors a waiting reporter may stay
// silent (a queued Register's announced wait, a refused reporter's retry
// slot plus jitter), and the longest the monitors let one such event keep
// a node from being judged. One constant, so the collector never promises
// a wait the monitors cut short. Collectors cap their own delays well
// below it (20 s retry slots, 30 s with the reporter's jitter); the margin
// leaves room for a collector configured otherwise, while a wrong value
// cannot hide a dead node for long.
const MaxWaitingWithin = time.Minute
