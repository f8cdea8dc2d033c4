package controllers

import "time"

// The suite's Baselines write their pooled commitment figures every 3 seconds at most,
// not every minute.
func init() { commitmentsMinWrite = 3 * time.Second }
