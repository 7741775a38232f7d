package redisinflight_test

const holderEnv = "REDISINFLIGHT_HOLDER"

func holder(addr string) {}
