package dispatch

// DeliverySessionID exposes deliverySessionID to the external tests.
var DeliverySessionID = deliverySessionID
