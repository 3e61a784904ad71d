# A public network load balancer on port 80 in front of the front ends' data
# port. Layer 4 keeps the front ends the only HTTP hop, as in the paper; the
# security group (set at creation: NLB groups cannot be added later) lets
# the front ends admit the balancer by group rather than by address.
resource "aws_lb" "frontend" {
  name               = "${var.name}-frontend"
  load_balancer_type = "network"
  internal           = false
  subnets            = local.public_subnet_ids
  security_groups    = [aws_security_group.lb.id]

  # wrk resolves the name once; without cross-zone balancing every
  # connection would land on the front ends of a single zone.
  enable_cross_zone_load_balancing = true
}

resource "aws_lb_target_group" "frontend" {
  name                 = "${var.name}-frontend"
  port                 = var.frontend_port
  protocol             = "TCP"
  target_type          = "instance"
  vpc_id               = local.vpc_id
  deregistration_delay = 30

  # A front end answers 200 on /healthz only once it holds an assignment
  # (503 before), so a fresh one takes traffic only when it can route it.
  # The NLB's default success codes (200-399) apply.
  health_check {
    enabled             = true
    protocol            = "HTTP"
    path                = "/healthz"
    port                = "traffic-port"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }
}

resource "aws_lb_listener" "http" {
  load_balancer_arn = aws_lb.frontend.arn
  port              = 80
  protocol          = "TCP"

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.frontend.arn
  }
}
